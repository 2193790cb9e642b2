// Keras' UnitNormalization layer: each sample scaled to unit L2 norm across `axis` (Keras' axes,
// -1 the last; an int or a list; the batch axis is not one of them: samples stay apart, as the
// replicas split them), y = x · rsqrt(max(Σ x², 1e-12)) as Keras 2 (tf.math.l2_normalize) and
// Keras 3 compute it. No weights. The arithmetic is kernel_math's unit_normalize_*, on the
// layer's backend. Ownership and threads: as every layer's (tandem/layer.hpp).
//
// Keras' Identity layer: its input, unchanged (a view; the gradient passes through).
// Keras' ActivityRegularization: an Identity whose output carries the activity penalty
// l1·Σ|y| + l2·Σy² (the Model's activity regularizers compute it, as for any layer's
// activity_regularizer).
#pragma once

#include <vector>

#include "backend/axis_groups.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class UnitNormalization : public Layer {
 public:
  /// `axes` as the config gives them (the integer form as a list of one).
  UnitNormalization(std::string name, std::vector<std::int64_t> axes, bool axis_listed);
  std::string class_name() const override { return "UnitNormalization"; }
  /// Throws ShapeError naming the layer for an axis the input does not have, or the batch axis.
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  std::string label() const { return "layer '" + name() + "' (UnitNormalization)"; }

  std::vector<std::int64_t> axes_;
  bool axis_listed_;
  backend::UnitNormDesc desc_;
  Shape input_shape_;
  Tensor input_;  // the last forward's input (shared storage)
  Tensor output_, grad_input_;
};

class Identity : public Layer {
 public:
  explicit Identity(std::string name) : Layer(std::move(name)) {}
  std::string class_name() const override { return "Identity"; }
  Shape build(const Shape& input_shape, Rng&) override;
  const Tensor& forward(const Tensor& x, bool) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  Shape input_shape_;
  Tensor output_, grad_input_;
};

class ActivityRegularization : public Identity, public OwnActivityPenalty {
 public:
  ActivityRegularization(std::string name, double l1, double l2)
      : Identity(std::move(name)), l1_(l1), l2_(l2) {}
  std::string class_name() const override { return "ActivityRegularization"; }
  nlohmann::json config() const override;
  std::pair<double, double> activity_penalty() const override { return {l1_, l2_}; }

 private:
  double l1_, l2_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
