#include "nn/discretization.hpp"

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Discretization::Discretization(std::string name, std::vector<float> boundaries,
                               std::optional<CategoryMode> mode, double epsilon)
    : Layer(std::move(name)), boundaries_(std::move(boundaries)), mode_(mode), epsilon_(epsilon) {}

Shape Discretization::build(const Shape& input_shape, Rng&) {
  input_shape_ = input_shape;
  placed_boundaries_ = Tensor();
  if (!mode_) return input_shape;
  geometry_ =
      category_geometry(input_shape, *mode_, static_cast<std::int64_t>(boundaries_.size()) + 1);
  return geometry_.output;
}

const Tensor& Discretization::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (Discretization)");
  const auto count = static_cast<std::int64_t>(boundaries_.size());
  if (placed_boundaries_.size() != count || placed_boundaries_.memory() != ops().memory())
    ops().copy(Tensor::from_vector({count}, boundaries_), ops().place(placed_boundaries_, {count}));
  Tensor& bins = mode_ ? bins_ : output_;
  ops().discretize(x, placed_boundaries_, ops().place(bins, x.shape()));
  if (mode_)
    encode_categories(ops(), bins_, input_shape_, geometry_, count + 1, *mode_, output_, name(),
                      "Discretization", sample_offset());
  return output_;
}

const Tensor& Discretization::backward(const Tensor&, bool need_input_grad) {
  return no_input_gradient(ops(), output_.dim(0), input_shape_, need_input_grad, grad_input_);
}

nlohmann::json Discretization::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"bin_boundaries", boundaries_},
          {"num_bins", boundaries_.size() + 1},
          {"epsilon", epsilon_},
          {"output_mode", mode_ ? category_mode_name(*mode_) : "int"},
          {"sparse", false}};
}

}  // namespace tandem::nn
