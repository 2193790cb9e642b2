#include "nn/batch_normalization.hpp"

#include <algorithm>

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

BatchNormalization::BatchNormalization(std::string name, BatchNormalizationOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  gamma_.name = "gamma";
  beta_.name = "beta";
  moving_mean_.name = "moving_mean";
  moving_mean_.trainable = false;
  moving_variance_.name = "moving_variance";
  moving_variance_.trainable = false;
}

Shape BatchNormalization::build(const Shape& input_shape, Rng& init) {
  if (input_shape.empty())
    throw ShapeError("layer '" + name() +
                     "' (BatchNormalization) needs inputs with a channel axis, got " +
                     shape_to_string(input_shape, true));
  const auto last = static_cast<std::int64_t>(input_shape.size());
  if (options_.axis != -1 && options_.axis != last)
    throw ShapeError("layer '" + name() + "' (BatchNormalization): axis " +
                     std::to_string(options_.axis) + " of inputs " +
                     shape_to_string(input_shape, true) +
                     " is not the last axis; Tandem normalises the last axis only "
                     "(channels_last, axis=-1)");
  input_shape_ = input_shape;
  channels_ = input_shape.back();
  const std::int64_t c = channels_;
  // Keras creates (and draws) the weights in this order.
  if (options_.scale) {
    gamma_.value = Tensor({c});
    gamma_.grad = Tensor({c});
    options_.gamma_initializer.fill(gamma_.value, init);
  }
  if (options_.center) {
    beta_.value = Tensor({c});
    beta_.grad = Tensor({c});
    options_.beta_initializer.fill(beta_.value, init);
  }
  moving_mean_.value = Tensor({c});
  options_.moving_mean_initializer.fill(moving_mean_.value, init);
  moving_variance_.value = Tensor({c});
  options_.moving_variance_initializer.fill(moving_variance_.value, init);
  normalization_.reset();
  return input_shape;
}

backend::BatchNorm& BatchNormalization::normalization() {
  if (!normalization_ || normalization_backend_ != &ops()) {
    normalization_ = ops().batch_norm({channels_, options_.momentum, options_.epsilon,
                                       options_.scale, options_.center, output_relu_});
    normalization_backend_ = &ops();
  }
  return *normalization_;
}

const Tensor& BatchNormalization::forward(const Tensor& x, bool training) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (BatchNormalization)");
  input_ = x;
  ops().place(output_, x.shape());
  const Tensor* gamma = options_.scale ? &gamma_.value : nullptr;
  const Tensor* beta = options_.center ? &beta_.value : nullptr;
  // Keras 3: `training and self.trainable` uses the batch statistics; otherwise the moving ones.
  if (training && trainable()) {
    normalization().forward_training(x, gamma, beta, moving_mean_.value, moving_variance_.value,
                                     output_, statistics_sum(), mask_);
    if (cross_replica_ && !options_.synchronized)
      average_moving_statistics(normalization().counted_rows());
  } else
    normalization().forward_inference(x, gamma, beta, moving_mean_.value, moving_variance_.value,
                                      output_);
  return output_;
}

const Tensor& BatchNormalization::backward(const Tensor& grad_output, bool need_input_grad) {
  if (grad_output.size() != input_.size())
    throw ShapeError("layer '" + name() + "' (BatchNormalization): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output " +
                     shape_to_string(input_.shape()));
  if (need_input_grad)
    ops().place(grad_input_, input_.shape());
  else
    grad_input_ = Tensor();
  normalization().backward(input_, output_, grad_output, options_.scale ? &gamma_.value : nullptr,
                           options_.scale && !gamma_.grad.empty() ? &gamma_.grad : nullptr,
                           options_.center && !beta_.grad.empty() ? &beta_.grad : nullptr,
                           need_input_grad ? &grad_input_ : nullptr, statistics_sum(), mask_);
  return grad_input_;
}

bool BatchNormalization::output_masked(bool input_masked) const {
  if (input_masked && input_shape_.size() != 2)
    throw ShapeError("layer '" + name() +
                     "' (BatchNormalization) receives a mask of the steps of "
                     "inputs " +
                     shape_to_string(input_shape_, true) +
                     "; Keras applies a mask to sequences (batch, steps, features) alone");
  return input_masked;
}

backend::SumAcrossReplicas BatchNormalization::statistics_sum() const {
  return options_.synchronized ? cross_replica_ : backend::SumAcrossReplicas();
}

// Each replica moved its statistics by its own shard's mean and variance; their average,
// weighted by the shards' rows, moves the mean as the whole batch's mean would (the variance by
// the shards' pooled variance, as TensorFlow's MirroredStrategy reads replica-local moving
// statistics), and leaves every replica with the same values: validation, checkpoints and the
// template then agree (each replica used to keep its own, and checkpoints held replica 0's).
void BatchNormalization::average_moving_statistics(std::int64_t rows) {
  const std::int64_t c = channels_;
  const bool on_host = moving_mean_.value.on_host();
  Tensor mean = on_host ? moving_mean_.value : Tensor({c});
  Tensor variance = on_host ? moving_variance_.value : Tensor({c});
  if (!on_host) {
    ops().copy(moving_mean_.value, mean);
    ops().copy(moving_variance_.value, variance);
  }
  std::vector<double> sums(static_cast<std::size_t>(2 * c + 1));
  for (std::int64_t k = 0; k < c; ++k) {
    sums[static_cast<std::size_t>(k)] = static_cast<double>(rows) * mean[k];
    sums[static_cast<std::size_t>(c + k)] = static_cast<double>(rows) * variance[k];
  }
  sums[static_cast<std::size_t>(2 * c)] = static_cast<double>(rows);
  cross_replica_(sums.data(), sums.size());
  const double total = sums[static_cast<std::size_t>(2 * c)];
  if (total == 0) return;  // no replica had rows: nothing moved
  for (std::int64_t k = 0; k < c; ++k) {
    mean[k] = static_cast<float>(sums[static_cast<std::size_t>(k)] / total);
    variance[k] = static_cast<float>(sums[static_cast<std::size_t>(c + k)] / total);
  }
  if (!on_host) {
    ops().copy(mean, moving_mean_.value);
    ops().copy(variance, moving_variance_.value);
  }
}

void BatchNormalization::set_absorb_output_relu(bool absorb) {
  if (absorb != output_relu_) normalization_.reset();
  output_relu_ = absorb;
}

std::vector<Parameter*> BatchNormalization::parameters() {
  std::vector<Parameter*> out;
  if (options_.scale) out.push_back(&gamma_);
  if (options_.center) out.push_back(&beta_);
  out.push_back(&moving_mean_);
  out.push_back(&moving_variance_);
  return out;
}

nlohmann::json BatchNormalization::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"axis", options_.axis},
          {"momentum", options_.momentum},
          {"epsilon", options_.epsilon},
          {"center", options_.center},
          {"scale", options_.scale},
          {"beta_initializer", options_.beta_initializer.config()},
          {"gamma_initializer", options_.gamma_initializer.config()},
          {"moving_mean_initializer", options_.moving_mean_initializer.config()},
          {"moving_variance_initializer", options_.moving_variance_initializer.config()},
          {"beta_regularizer", nullptr},
          {"gamma_regularizer", nullptr},
          {"beta_constraint", nullptr},
          {"gamma_constraint", nullptr},
          {"synchronized", options_.synchronized}};
}

}  // namespace tandem::nn
