// Reshape: (batch, d1, d2, ...) -> (batch, target_shape...), Keras semantics; a view, no copy.
// At most one target dimension may be -1: it is inferred from the element count in build().
#pragma once

#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Reshape : public Layer {
 public:
  /// `target_shape` as the config gives it (positive dimensions and at most one -1).
  Reshape(std::string name, Shape target_shape);
  std::string class_name() const override { return "Reshape"; }
  /// Throws ShapeError naming the layer when the per-sample element count does not fit.
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  Shape target_shape_;  // as configured, possibly with -1
  Shape input_shape_, output_shape_;
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
