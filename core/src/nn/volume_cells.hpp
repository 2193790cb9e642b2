// The volume layers that move whole cells, as Keras defines them over (batch, depth, rows, cols,
// channels):
//   ZeroPadding3D  zeros around each volume: (before, after) along depth, rows and cols
//   Cropping3D     the same amounts cut away
//   UpSampling3D   each cell repeated over a (depth, rows, cols) block (nearest neighbour)
// Each is its 2-D layer (nn/image_layers.hpp) run twice on views of the volume, both passes
// copying whole cells: the first moves depth slices and rows on the image (depth, rows, cols ·
// channels), whose cells are whole rows of the volume; the second moves columns on the image
// (depth · rows, cols, channels) of the first's output. The gradient is the two gradients in
// reverse order. So every backend computes them with its image operations, and the ONNX graph is
// the two layers' nodes on the same views.
//
// Ownership and threads: as every layer's; the two inner layers are owned and run on this
// layer's backend.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "nn/image_layers.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class TwoPassVolume : public Layer {
 public:
  using Layer::Layer;
  /// input_shape is (depth, rows, cols, channels); ShapeError naming the layer otherwise.
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;

  /// After build: the passes (owned by this layer), the views they compute on and their outputs.
  Layer& first() { return *first_; }
  Layer& second() { return *second_; }
  const Shape& first_input() const { return first_input_; }
  const Shape& first_output() const { return first_output_; }
  const Shape& second_input() const { return second_input_; }
  const Shape& second_output() const { return second_output_; }

 protected:
  /// Throws ShapeError (naming the layer) where the volume `input_shape` does not fit.
  virtual void check_fits(const Shape& input_shape) const = 0;
  /// The first pass' 2-D layer (depth as rows, rows as cols), and the second's (cols).
  virtual std::unique_ptr<Layer> make_first() const = 0;
  virtual std::unique_ptr<Layer> make_second() const = 0;
  std::string label() const { return "layer '" + name() + "' (" + class_name() + ")"; }

 private:
  std::unique_ptr<Layer> first_, second_;
  Shape input_shape_, first_input_, first_output_, second_input_, second_output_, output_shape_;
  Tensor output_, grad_input_;
};

/// ((before, after) of depth, of rows, of cols).
using VolumeBorders = std::array<std::array<std::int64_t, 2>, 3>;

/// ZeroPadding3D (pad = true) or Cropping3D.
class VolumeBorder : public TwoPassVolume {
 public:
  VolumeBorder(std::string name, bool pad, VolumeBorders borders)
      : TwoPassVolume(std::move(name)), pad_(pad), borders_(borders) {}
  std::string class_name() const override { return pad_ ? "ZeroPadding3D" : "Cropping3D"; }
  nlohmann::json config() const override;

 protected:
  void check_fits(const Shape& input_shape) const override;
  std::unique_ptr<Layer> make_first() const override;
  std::unique_ptr<Layer> make_second() const override;

 private:
  bool pad_;
  VolumeBorders borders_;
};

class UpSampling3D : public TwoPassVolume {
 public:
  /// factors (depth, rows, cols), each > 0.
  UpSampling3D(std::string name, std::array<std::int64_t, 3> factors)
      : TwoPassVolume(std::move(name)), factors_(factors) {}
  std::string class_name() const override { return "UpSampling3D"; }
  nlohmann::json config() const override;

 protected:
  void check_fits(const Shape& input_shape) const override;
  std::unique_ptr<Layer> make_first() const override;
  std::unique_ptr<Layer> make_second() const override;

 private:
  std::array<std::int64_t, 3> factors_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
