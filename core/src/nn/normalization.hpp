// Normalization with fixed statistics, Keras semantics: each feature of the last axis is
// standardised with the mean and variance given in the config (what Keras' adapt() computed),
// y = (x - mean) / max(sqrt(variance), 1e-7), or, with invert, x * max(sqrt(variance), 1e-7) +
// mean. The statistics are constants, not weights (Keras keeps them so when the config gives
// them). Computes on its backend (column_affine), with the per-feature factors copied to the
// backend's device on first use there. Ownership and threads: as every layer's.
#pragma once

#include <vector>

#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Normalization : public Layer {
 public:
  /// `mean` and `variance`: one value (every feature) or one per feature of the last axis.
  Normalization(std::string name, std::vector<double> mean, std::vector<double> variance,
                bool invert)
      : Layer(std::move(name)),
        mean_(std::move(mean)),
        variance_(std::move(variance)),
        invert_(invert) {}
  std::string class_name() const override { return "Normalization"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  /// The factors on the backend's device (copied from the host ones when it changed).
  void place_factors();

  std::vector<double> mean_, variance_;
  bool invert_;
  Shape input_shape_;
  Tensor host_scale_, host_shift_;  // y = x * scale + shift, per feature
  Tensor scale_, shift_;            // on the layer's backend
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
