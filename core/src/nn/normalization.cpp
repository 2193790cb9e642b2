#include "nn/normalization.hpp"

#include <algorithm>
#include <cmath>

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

constexpr double kEpsilon = 1e-7;  // Keras' backend.epsilon()

}  // namespace

Shape Normalization::build(const Shape& input_shape, Rng&) {
  const std::string who = "layer '" + name() + "' (Normalization)";
  if (input_shape.empty())
    throw ShapeError(who + " needs inputs with a feature axis, got " +
                     shape_to_string(input_shape, true));
  const std::int64_t features = input_shape.back();
  for (const auto* stats : {&mean_, &variance_})
    if (stats->size() != 1 && static_cast<std::int64_t>(stats->size()) != features)
      throw ShapeError(who + ": " + std::to_string(stats->size()) +
                       " statistics do not fit the " + std::to_string(features) +
                       " features of inputs " + shape_to_string(input_shape, true));
  input_shape_ = input_shape;
  host_scale_ = Tensor({features});
  host_shift_ = Tensor({features});
  for (std::int64_t c = 0; c < features; ++c) {
    const double mean = mean_[mean_.size() == 1 ? 0 : static_cast<std::size_t>(c)];
    const double var = variance_[variance_.size() == 1 ? 0 : static_cast<std::size_t>(c)];
    const double deviation = std::max(std::sqrt(var), kEpsilon);
    host_scale_[c] = static_cast<float>(invert_ ? deviation : 1.0 / deviation);
    host_shift_[c] = static_cast<float>(invert_ ? mean : -mean / deviation);
  }
  scale_ = shift_ = Tensor();
  return input_shape;
}

void Normalization::place_factors() {
  if (scale_.size() == host_scale_.size() && scale_.memory() == ops().memory()) return;
  ops().copy(host_scale_, ops().place(scale_, host_scale_.shape()));
  ops().copy(host_shift_, ops().place(shift_, host_shift_.shape()));
}

const Tensor& Normalization::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (Normalization)");
  place_factors();
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

nlohmann::json Normalization::config() const {
  const auto stats = [](const std::vector<double>& v) {
    return v.size() == 1 ? nlohmann::json(v[0]) : nlohmann::json(v);
  };
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"axis", -1},
          {"mean", stats(mean_)},
          {"variance", stats(variance_)},
          {"invert", invert_}};
}

}  // namespace tandem::nn
