#include "nn/time_distributed.hpp"

#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

// (rows, steps, rest...) seen as (rows · steps, rest...).
Tensor steps_as_rows(const Tensor& t, std::int64_t rows, std::int64_t steps, const Shape& rest) {
  return t.reshaped(with_batch(rows * steps, rest));
}

}  // namespace

Shape TimeDistributed::build(const Shape& input_shape, Rng& init) {
  if (input_shape.size() < 2)
    throw ShapeError("layer '" + name() + "' (TimeDistributed) needs inputs of at least 3 axes, " +
                     "(batch, steps, ...), got " + shape_to_string(input_shape, true));
  steps_ = input_shape[0];
  step_input_ = Shape(input_shape.begin() + 1, input_shape.end());
  step_output_ = inner_->build(step_input_, init);
  if (const SeveralOutputs* several = several_outputs_of(*inner_);
      several && several->output_parts().size() > 1)
    throw ShapeError("layer '" + name() + "' (TimeDistributed) wraps a layer of " +
                     std::to_string(several->output_parts().size()) +
                     " outputs (its return_state), as Keras does not; wrap one of one output");
  Shape out{steps_};
  out.insert(out.end(), step_output_.begin(), step_output_.end());
  return out;
}

const Tensor& TimeDistributed::forward(const Tensor& x, bool training) {
  Shape sample{steps_};
  sample.insert(sample.end(), step_input_.begin(), step_input_.end());
  require_batch_of(x, sample, "layer '" + name() + "' (TimeDistributed)");
  inner_->set_backend(ops());
  inner_->set_sample_offset(sample_offset() * steps_);
  const std::int64_t rows = x.dim(0);
  const Tensor& y = inner_->forward(steps_as_rows(x, rows, steps_, step_input_), training);
  Shape out{rows, steps_};
  out.insert(out.end(), step_output_.begin(), step_output_.end());
  output_ = y.reshaped(out);
  return output_;
}

const Tensor& TimeDistributed::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t rows = grad_output.rank() > 0 ? grad_output.dim(0) : 0;
  const Tensor& dx =
      inner_->backward(steps_as_rows(grad_output, rows, steps_, step_output_), need_input_grad);
  if (!need_input_grad) return dx;
  Shape in{rows, steps_};
  in.insert(in.end(), step_input_.begin(), step_input_.end());
  grad_input_ = dx.reshaped(in);
  return grad_input_;
}

// Keras' config: the wrapped layer's entry under "layer".
nlohmann::json TimeDistributed::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"layer", {{"class_name", inner_->class_name()}, {"config", inner_->config()}}}};
}

}  // namespace tandem::nn
