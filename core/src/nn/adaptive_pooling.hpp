// Keras 3's AdaptiveAveragePooling1D/2D/3D and AdaptiveMaxPooling1D/2D/3D: each sample pooled to
// `output_size` cells per spatial axis whatever its own size, channels_last — (batch, steps,
// channels), (batch, rows, cols, channels) or (batch, depth, rows, cols, channels) — output cell
// i of an axis of n cells reading the cells [floor(i·n/m), ceil((i+1)·n/m)) of it, as Keras'
// ops.adaptive_avg_pool / adaptive_max_pool and PyTorch's adaptive pools define it (a maximum:
// the first in scan order, a NaN winning; its gradient to that cell alone). One class: the
// six differ in their kind and in how many axes they pool. Computes on its backend
// (adaptive_pool_forward / _backward). Ownership and threads: as every layer's
// (tandem/layer.hpp).
#pragma once

#include <vector>

#include "backend/ops.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class AdaptivePooling : public Layer {
 public:
  /// `output_size`: one size per spatial axis (1, 2 or 3 of them).
  AdaptivePooling(std::string name, bool max, std::vector<std::int64_t> output_size);
  /// "AdaptiveAveragePooling2D", "AdaptiveMaxPooling1D", ...
  std::string class_name() const override;
  /// Throws ShapeError naming the layer for inputs of another rank or of more than 2^24 cells
  /// per sample (the maxima's cells are kept as floats).
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  std::string label() const { return "layer '" + name() + "' (" + class_name() + ")"; }

  bool max_;
  std::vector<std::int64_t> output_size_;
  Shape input_shape_, output_shape_;
  backend::AdaptivePoolDesc desc_;  // batch set per forward
  Tensor output_, arg_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
