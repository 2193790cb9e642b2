#include "nn/normalization.hpp"

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

Parameter statistic(const char* name) {
  Parameter p;
  p.name = name;
  p.trainable = false;
  return p;
}

}  // namespace

Normalization::Normalization(std::string name, std::vector<double> mean,
                             std::vector<double> variance, bool invert)
    : Layer(std::move(name)),
      config_mean_(std::move(mean)),
      config_variance_(std::move(variance)),
      invert_(invert),
      mean_(statistic("mean")),
      variance_(statistic("variance")),
      count_(statistic("count")) {}

Normalization::Normalization(std::string name, bool invert)
    : Normalization(std::move(name), {}, {}, invert) {}

Shape Normalization::build(const Shape& input_shape, Rng&) {
  const std::string who = "layer '" + name() + "' (Normalization)";
  if (input_shape.empty())
    throw ShapeError(who + " needs inputs with a feature axis, got " +
                     shape_to_string(input_shape, true));
  const std::int64_t features = input_shape.back();
  input_shape_ = input_shape;
  mean_.value = Tensor({features});
  variance_.value = Tensor({features});
  if (adapted()) {  // Keras' initial values, until the weights are loaded
    mean_.value.fill(0.0f);
    variance_.value.fill(1.0f);
    count_.value = Tensor(Shape{});
    count_.value.fill(0.0f);
  } else {
    for (const auto* stats : {&config_mean_, &config_variance_})
      if (stats->size() != 1 && static_cast<std::int64_t>(stats->size()) != features)
        throw ShapeError(who + ": " + std::to_string(stats->size()) +
                         " statistics do not fit the " + std::to_string(features) +
                         " features of inputs " + shape_to_string(input_shape, true));
    for (std::int64_t c = 0; c < features; ++c) {
      const auto at = [c](const std::vector<double>& v) {
        return static_cast<float>(v[v.size() == 1 ? 0 : static_cast<std::size_t>(c)]);
      };
      mean_.value[c] = at(config_mean_);
      variance_.value[c] = at(config_variance_);
    }
  }
  placed_mean_ = placed_variance_ = Tensor();
  return input_shape;
}

void Normalization::set_statistics(const std::vector<double>& mean,
                                   const std::vector<double>& variance, std::int64_t count) {
  for (std::int64_t c = 0; c < mean_.value.size(); ++c) {
    mean_.value[c] = static_cast<float>(mean[static_cast<std::size_t>(c)]);
    variance_.value[c] = static_cast<float>(variance[static_cast<std::size_t>(c)]);
  }
  count_.value[0] = static_cast<float>(count);
}

std::pair<const Tensor*, const Tensor*> Normalization::statistics() {
  if (adapted()) return {&mean_.value, &variance_.value};
  if (placed_mean_.size() != mean_.value.size() || placed_mean_.memory() != ops().memory()) {
    ops().copy(mean_.value, ops().place(placed_mean_, mean_.value.shape()));
    ops().copy(variance_.value, ops().place(placed_variance_, variance_.value.shape()));
  }
  return {&placed_mean_, &placed_variance_};
}

const Tensor& Normalization::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (Normalization)");
  const auto [mean, variance] = statistics();
  const Shape features{input_shape_.back()};
  ops().normalization_factors(*mean, *variance, invert_, ops().place(scale_, features),
                              ops().place(shift_, features));
  ops().column_affine(x, scale_, &shift_, ops().place(output_, x.shape()), input_shape_.back());
  return output_;
}

const Tensor& Normalization::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  ops().column_affine(grad_output, scale_, nullptr, ops().place(grad_input_, grad_output.shape()),
                      input_shape_.back());
  return grad_input_;
}

std::vector<Parameter*> Normalization::parameters() {
  if (!adapted()) return {};
  return {&mean_, &variance_, &count_};
}

nlohmann::json Normalization::config() const {
  const auto stats = [this](const std::vector<double>& v) {
    if (adapted()) return nlohmann::json(nullptr);  // in the weights
    return v.size() == 1 ? nlohmann::json(v[0]) : nlohmann::json(v);
  };
  return {{"name", name()},   {"trainable", trainable()},    {"dtype", "float32"},
          {"axis", -1},       {"mean", stats(config_mean_)}, {"variance", stats(config_variance_)},
          {"invert", invert_}};
}

}  // namespace tandem::nn
