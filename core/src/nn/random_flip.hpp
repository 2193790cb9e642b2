// Keras' RandomFlip preprocessing layer, active in training only: each sample of images (rows,
// cols, channels) is mirrored left-right ("horizontal"), upside down ("vertical"), or each
// independently ("horizontal_and_vertical", Keras' default), with probability one half. The
// draws (two per sample) come from the layer's RandomStream (nn/random_stream.hpp), keyed by
// the sample's place in the global batch, so no device plan changes them; the gradient flips
// back through the same draws. The identity at inference.
#pragma once

#include <optional>
#include <string>

#include "nn/random_stream.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class RandomFlip : public Layer {
 public:
  /// `mode`: "horizontal", "vertical" or "horizontal_and_vertical".
  RandomFlip(std::string name, std::string mode, std::optional<std::uint64_t> seed);
  std::string class_name() const override { return "RandomFlip"; }
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
  backend::FlipDesc desc_for(std::int64_t batch) const;

  std::string mode_;
  RandomStream random_;
  Shape input_shape_;
  bool flipped_ = false;  // whether the last forward drew flips
  Tensor draws_;          // the last training forward's draws, two per sample
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
