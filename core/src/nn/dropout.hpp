// Dropout: during training zeroes each value with probability `rate` and scales the rest by
// 1/(1-rate) (inverted dropout, as Keras); the identity at inference. Keras' noise_shape shares
// one mask value along the axes where it is 1; SpatialDropout1D/2D/3D are Dropout with the
// noise shape (batch, 1, ..., channels): whole feature maps are dropped. AlphaDropout (Keras')
// keeps a self-normalizing (SELU) network's mean and variance: a dropped value becomes SELU's
// negative saturation α' = -λα, and the result a·(x·kept + α'·(1 - kept)) + b with
// a = ((1 - rate)(1 + rate·α'²))^-1/2 and b = -a·α'·rate; its gradient dy·a·kept.
//
// The mask comes from the layer's RandomStream (nn/random_stream.hpp), so it never depends on
// the device plan.
#pragma once

#include <optional>
#include <vector>

#include "nn/random_stream.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// The axis groups of a sample of `shape` under Keras' noise shape `noise` (one entry per axis:
/// null or the axis' size for a value per element, 1 for one value shared along it). Throws
/// ShapeError naming `who` for a noise shape that does not fit.
backend::AxisGroups noise_groups(const Shape& shape,
                                 const std::vector<std::optional<std::int64_t>>& noise,
                                 const std::string& who);

struct DropoutOptions {
  double rate = 0;
  std::optional<std::uint64_t> seed;
  /// Keras' noise_shape without its batch entry (which must be null: one mask per sample): per
  /// sample axis null (the input's size), 1 (one value shared along it) or the input's size.
  /// Empty: one value per element.
  std::optional<std::vector<std::optional<std::int64_t>>> noise_shape;
  /// 1, 2 or 3 for SpatialDropout1D/2D/3D (channels_last; noise_shape then implied); 0 for
  /// Dropout.
  int spatial_rank = 0;
  bool alpha = false;  // AlphaDropout
};

class Dropout : public Layer {
 public:
  Dropout(std::string name, DropoutOptions options);
  std::string class_name() const override;
  /// Throws ShapeError naming the layer for a noise_shape that does not fit the input, or a
  /// spatial form given an input of another rank.
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;
  /// {stream seed, training forwards so far}.
  std::vector<std::uint64_t> random_state() const override { return random_.state(); }
  void set_random_state(const std::vector<std::uint64_t>& state) override {
    random_.set_state(state, name());
  }

 private:
  /// SELU's negative saturation, -λα (Keras' alpha_p).
  static constexpr double kAlphaPrime = -1.6732632423543772848170429916717 * 1.0507009873554804934193349852946;
  /// AlphaDropout's affine correction a, b and the kept share 1 - rate.
  struct AlphaTerms {
    double a, b, kept;
  };
  AlphaTerms alpha_terms() const;

  DropoutOptions options_;
  RandomStream random_;
  backend::AxisGroups noise_;  // rank 0: one value per element
  bool masked_ = false;        // whether the last forward applied a mask
  Tensor mask_, output_, grad_input_;
  Tensor alpha_part_;  // AlphaDropout's term of the mask
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
