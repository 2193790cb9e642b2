// The merging layers of functional models: what they share (MergeLayer: two or more inputs
// through Layer's list forms; in a Sequential model they have nothing to merge and say so) and
// Concatenate (the inputs side by side along one axis, as in a U-Net's skip path; its gradients
// are the output gradient's slices). The element-wise ones (Add, Subtract, Multiply, ...) are in
// nn/elementwise_merge.hpp. Ownership and threads: as every layer's (tandem/layer.hpp).
#pragma once

#include <vector>

#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// What every merging layer shares: several inputs, and no one-input forms.
class MergeLayer : public Layer {
 public:
  using Layer::Layer;
  bool takes_several_inputs() const override { return true; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 protected:
  /// Throws ShapeError unless there are at least two inputs.
  void require_several(std::size_t inputs) const;
  /// Throws ShapeError naming the layer unless x has shape (batch, shape...).
  void check_input(const Tensor& x, const Shape& shape) const;

 private:
  [[noreturn]] void refuse_one_input() const;
};

class Concatenate : public MergeLayer {
 public:
  /// `axis` as Keras counts it: -1 the last, 1 the first after the batch axis.
  Concatenate(std::string name, int axis) : MergeLayer(std::move(name)), axis_(axis) {}
  std::string class_name() const override { return "Concatenate"; }
  Shape build_inputs(const std::vector<Shape>& input_shapes, Rng& init) override;
  const Tensor& forward_inputs(const std::vector<const Tensor*>& inputs, bool training) override;
  std::vector<const Tensor*> backward_inputs(const Tensor& grad_output,
                                             bool need_input_grad) override;
  nlohmann::json config() const override;
  /// After build: the per-sample axis it joins along (0: the first after the batch axis) and
  /// the inputs' per-sample rank (nn/sequence_masks.cpp joins their masks along it).
  int joined_axis() const { return joined_axis_; }
  std::size_t input_rank() const { return input_shapes_.empty() ? 0 : input_shapes_[0].size(); }
  /// After build: each input's length along the joined axis.
  std::int64_t input_length(std::size_t i) const {
    return input_shapes_[i][static_cast<std::size_t>(joined_axis_)];
  }

 private:
  int axis_;
  int joined_axis_ = 0;
  std::vector<Shape> input_shapes_;
  std::vector<std::int64_t> widths_;  // per input: its axis length times the inner size
  std::int64_t total_width_ = 0;      // the output's
  Shape output_shape_;
  Tensor output_;
  std::vector<Tensor> grad_inputs_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
