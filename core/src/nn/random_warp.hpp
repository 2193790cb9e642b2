// Keras' geometric preprocessing layers, active in training only: RandomTranslation,
// RandomRotation, RandomZoom and RandomCrop, each a per-sample transform of images (rows, cols,
// channels) through Backend::warp_images (backend/image_geometry.hpp's WarpDesc says how each
// is drawn, interpolated and filled, as Keras does). The draws (two per sample) come from the
// layer's RandomStream keyed by the sample's place in the global batch, so no device plan
// changes them; the gradient flows back through the same weights. At inference the identity,
// except RandomCrop, which then centre-crops to the target's aspect ratio and resizes
// (Keras' smart_resize), as it also does in training for images smaller than the target.
// RandomCrop draws its offset per sample (Keras draws one per batch).
#pragma once

#include <optional>
#include <string>

#include "backend/image_geometry.hpp"
#include "nn/random_stream.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class RandomWarp : public Layer {
 public:
  /// `desc` carries the kind, factor ranges, interpolation and fill (its sizes are set by
  /// build()); crop_rows/crop_cols are RandomCrop's target (0 for the others); `keras_config`
  /// is the layer's own keys as read, returned by config().
  RandomWarp(std::string name, backend::WarpDesc desc, std::int64_t crop_rows,
             std::int64_t crop_cols, std::optional<std::uint64_t> seed,
             nlohmann::json keras_config);
  std::string class_name() const override;
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
  backend::WarpDesc desc_for(std::int64_t batch, bool training) const;

  backend::WarpDesc desc_;
  std::int64_t crop_rows_, crop_cols_;
  RandomStream random_;
  nlohmann::json keras_config_;
  Shape input_shape_;
  bool warped_ = false;  // whether the last forward transformed (and its desc_ is last_)
  backend::WarpDesc last_;
  Tensor draws_;
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
