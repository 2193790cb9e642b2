// Keras' TimeDistributed wrapper: one layer applied to every step of a sequence (every slice
// along the first axis after the batch) with the same weights — a Dense on each step's
// features, a Conv2D on each frame of a video. The wrapped layer computes on the batch's steps as
// rows of their own: (batch, steps, ...) is seen as (batch · steps, ...) without a copy, and its
// output seen back as (batch, steps, ...).
//
// The wrapped layer is the wrapper's own (made from its config by the layer registry); its
// weights are the wrapper's, named as Keras 2 writes them ("time_distributed/kernel:0"; Keras 3
// keeps them under the attribute `layer`). It computes on the wrapper's backend, and its rows
// sit at sample_offset · steps in the global batch, so a random layer wrapped (Dropout) draws
// per step of each sample on any device layout. A Keras mask passes through unchanged.
// Ownership and threads: as every layer's (tandem/layer.hpp).
#pragma once

#include <memory>

#include "nn/layer_wrapper.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class TimeDistributed : public LayerWrapper {
 public:
  /// `inner` takes one input and is a layer whose rows are independent samples (the registry
  /// refuses the others, naming the config key).
  TimeDistributed(std::string name, std::unique_ptr<Layer> inner)
      : LayerWrapper(std::move(name), std::move(inner)) {}
  std::string class_name() const override { return "TimeDistributed"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override { return inner_->parameters(); }
  nlohmann::json config() const override;

  /// After build: the wrapped layer's per-sample input and output shapes (one step's).
  const Shape& step_input_shape() const { return step_input_; }
  const Shape& step_output_shape() const { return step_output_; }

 private:
  std::int64_t steps_ = 0;
  Shape step_input_, step_output_;
  Tensor output_, grad_input_;  // views of the wrapped layer's buffers, (batch, steps, ...)
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
