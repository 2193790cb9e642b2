#include "nn/stacked_rnn.hpp"

#include "tandem/error.hpp"

namespace tandem::nn {

StackedRnn::StackedRnn(std::string name, std::vector<std::unique_ptr<Recurrent>> cells,
                       std::string stack_name)
    : Layer(std::move(name)), cells_(std::move(cells)), stack_name_(std::move(stack_name)) {
  for (auto& cell : cells_)
    for (Parameter* p : cell->parameters()) p->name = stack_name_ + "/" + p->name;
}

Shape StackedRnn::build(const Shape& input_shape, Rng& init) {
  steps_ = input_shape.empty() ? 0 : input_shape[0];
  Shape shape = input_shape;
  for (auto& cell : cells_) shape = cell->build(shape, init);
  return shape;
}

const Tensor& StackedRnn::forward(const Tensor& x, bool training) {
  const Tensor* mask = input_mask_;
  const Tensor* later_mask = mask;  // what the cells after the first read: processing order
  if (mask && cells_.front()->goes_backwards() && x.rank() > 0) {
    reverse_steps(ops(), *mask, reversed_mask_, steps_, 1);
    later_mask = &reversed_mask_;
  }
  const Tensor* h = &x;
  for (std::size_t i = 0; i < cells_.size(); ++i) {
    Recurrent& cell = *cells_[i];
    cell.set_backend(ops());
    cell.set_sample_offset(sample_offset());
    cell.set_input_mask(i == 0 ? mask : later_mask);
    h = &cell.forward(*h, training);
  }
  return *h;
}

const Tensor& StackedRnn::backward(const Tensor& grad_output, bool need_input_grad) {
  const Tensor* g = &grad_output;
  for (std::size_t i = cells_.size(); i-- > 0;)
    g = &cells_[i]->backward(*g, i > 0 || need_input_grad);
  return *g;
}

std::vector<Parameter*> StackedRnn::parameters() {
  std::vector<Parameter*> out;
  for (auto& cell : cells_)
    for (Parameter* p : cell->parameters()) out.push_back(p);
  return out;
}

std::vector<std::string> StackedRnn::cell_classes() const {
  std::vector<std::string> classes;
  for (const auto& cell : cells_) classes.push_back(cell->config()["cell"]["class_name"]);
  return classes;
}

nlohmann::json StackedRnn::config() const {
  nlohmann::json c = cells_.back()->config();  // the RNN's keys as the last cell's layer has them
  c["name"] = name();
  c["trainable"] = trainable();
  c["go_backwards"] = cells_.front()->goes_backwards();
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& cell : cells_) cells.push_back(cell->config()["cell"]);
  c["cell"] = {{"class_name", "StackedRNNCells"},
               {"config",
                {{"name", stack_name_},
                 {"trainable", trainable()},
                 {"dtype", "float32"},
                 {"cells", cells}}}};
  return c;
}

std::vector<RuledWeight> StackedRnn::ruled_weights() {
  std::vector<RuledWeight> out;
  for (auto& cell : cells_)
    for (const RuledWeight& r : cell->ruled_weights()) out.push_back(r);
  return out;
}

std::vector<std::uint64_t> StackedRnn::random_state() const {
  std::vector<std::uint64_t> state;
  for (const auto& cell : cells_)
    for (std::uint64_t v : cell->random_state()) state.push_back(v);
  return state;
}

void StackedRnn::set_random_state(const std::vector<std::uint64_t>& state) {
  if (state.size() != random_state().size())
    throw DataError("layer '" + name() + "' (RNN): a random state of " +
                    std::to_string(state.size()) + " numbers, expected " +
                    std::to_string(random_state().size()));
  auto at = state.begin();
  for (auto& cell : cells_) {
    const auto n = static_cast<std::ptrdiff_t>(cell->random_state().size());
    cell->set_random_state({at, at + n});
    at += n;
  }
}

void StackedRnn::use_keras2_definitions() {
  for (auto& cell : cells_) cell->use_keras2_definitions();
}

}  // namespace tandem::nn
