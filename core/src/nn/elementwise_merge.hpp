// The merging layers that combine inputs of one shape element by element, as Keras' do: Add,
// Subtract (exactly two), Multiply, Average, Maximum and Minimum. Each folds its inputs in order
// (((x0 op x1) op x2) ...), so the float rounding is Keras'. Gradients: Add hands every input the
// output's gradient, Subtract its negation to the second, Multiply dy times the other inputs,
// Average dy / n, Maximum and Minimum dy to the input that won each element (the earliest on a
// tie). Ownership and threads: as every layer's (tandem/layer.hpp); a layer keeps borrowed
// pointers to its inputs from forward_inputs to the next backward_inputs (Multiply reads them).
#pragma once

#include <vector>

#include "nn/layer_extensions.hpp"
#include "nn/merge.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// Inputs of one shape; checks the count and shapes on build and on every forward.
class ElementwiseMerge : public MergeLayer {
 public:
  using MergeLayer::MergeLayer;
  Shape build_inputs(const std::vector<Shape>& input_shapes, Rng& init) override;
  const Tensor& forward_inputs(const std::vector<const Tensor*>& inputs, bool training) override;
  std::vector<const Tensor*> backward_inputs(const Tensor& grad_output,
                                             bool need_input_grad) override;

 protected:
  /// The most inputs the layer takes (Subtract: 2).
  virtual std::size_t max_inputs() const { return SIZE_MAX; }
  /// output_ = the merged inputs (already placed at the inputs' shape).
  virtual void merge(const std::vector<const Tensor*>& inputs) = 0;
  /// The gradient of each input, given dy.
  virtual std::vector<const Tensor*> gradients(const Tensor& dy) = 0;

  std::size_t inputs_ = 0;
  std::vector<const Tensor*> last_inputs_;  // borrowed from the last forward
  Tensor output_;
  std::vector<Tensor> grads_;  // one per input, as a layer needs them

 private:
  Shape shape_;  // every input's and the output's, per sample
};

/// Followed by a relu that is its only reader (nn::ReluAbsorber, paired by the Model), Add writes
/// max(0, sum) in its last addition and masks the gradient by it once for every input.
class Add : public ElementwiseMerge, public ReluAbsorber {
 public:
  using ElementwiseMerge::ElementwiseMerge;
  std::string class_name() const override { return "Add"; }
  void set_absorb_output_relu(bool absorb) override { output_relu_ = absorb; }
  bool absorbs_output_relu() const { return output_relu_; }

 protected:
  void merge(const std::vector<const Tensor*>& inputs) override;
  std::vector<const Tensor*> gradients(const Tensor& dy) override;

 private:
  bool output_relu_ = false;
};

class Subtract : public ElementwiseMerge {
 public:
  using ElementwiseMerge::ElementwiseMerge;
  std::string class_name() const override { return "Subtract"; }

 protected:
  std::size_t max_inputs() const override { return 2; }
  void merge(const std::vector<const Tensor*>& inputs) override;
  std::vector<const Tensor*> gradients(const Tensor& dy) override;
};

class Multiply : public ElementwiseMerge {
 public:
  using ElementwiseMerge::ElementwiseMerge;
  std::string class_name() const override { return "Multiply"; }

 protected:
  void merge(const std::vector<const Tensor*>& inputs) override;
  std::vector<const Tensor*> gradients(const Tensor& dy) override;
};

class Average : public ElementwiseMerge {
 public:
  using ElementwiseMerge::ElementwiseMerge;
  std::string class_name() const override { return "Average"; }

 protected:
  void merge(const std::vector<const Tensor*>& inputs) override;
  std::vector<const Tensor*> gradients(const Tensor& dy) override;
};

/// Maximum (maximum = true) or Minimum.
class Extremum : public ElementwiseMerge {
 public:
  Extremum(std::string name, bool maximum) : ElementwiseMerge(std::move(name)), maximum_(maximum) {}
  std::string class_name() const override { return maximum_ ? "Maximum" : "Minimum"; }

 protected:
  void merge(const std::vector<const Tensor*>& inputs) override;
  std::vector<const Tensor*> gradients(const Tensor& dy) override;

 private:
  bool maximum_;
  Tensor winner_;  // per element, the index of the input that won it
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
