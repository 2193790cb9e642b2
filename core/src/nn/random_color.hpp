// Keras' colour preprocessing layers, active in training only: RandomContrast (each channel of
// a sample pulled to or pushed from its mean by a factor drawn in [1 - lower, 1 + upper]) and
// RandomBrightness (a delta drawn in [lower, upper] times the value range added), the result
// clipped to value_range, through Backend::adjust_images (backend/image_geometry.hpp's
// AdjustDesc). value_range defaults to Keras' [0, 255]; Tandem's image datasets scale pixels to
// [0, 1] unless "scale" is 1, so such models give "value_range": [0, 1]. One draw per sample from
// the layer's RandomStream, keyed by its place in the global batch; the identity at inference.
#pragma once

#include <optional>
#include <string>

#include "backend/image_geometry.hpp"
#include "nn/random_stream.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class RandomColor : public Layer {
 public:
  /// `desc` carries the kind, the draw's range and the value range; `keras_config` is the
  /// layer's own keys as read, returned by config().
  RandomColor(std::string name, backend::AdjustDesc desc, std::optional<std::uint64_t> seed,
              nlohmann::json keras_config);
  std::string class_name() const override {
    return desc_.kind == backend::AdjustDesc::contrast ? "RandomContrast" : "RandomBrightness";
  }
  /// Throws ShapeError naming the layer unless input_shape is (rows, cols, channels).
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;
  std::vector<std::uint64_t> random_state() const override { return random_.state(); }
  void set_random_state(const std::vector<std::uint64_t>& state) override {
    random_.set_state(state, name());
  }

 private:
  backend::AdjustDesc desc_for(std::int64_t batch) const;

  backend::AdjustDesc desc_;
  RandomStream random_;
  nlohmann::json keras_config_;
  Shape input_shape_;
  bool adjusted_ = false;
  Tensor input_;  // the last training forward's x (shares its storage, as Dense)
  Tensor draws_, means_;
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
