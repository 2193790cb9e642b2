// BatchNormalization over the last axis (channels_last), Keras 3 semantics.
//
// Weights, in Keras order: gamma (if scale), beta (if center) — trainable — then moving_mean and
// moving_variance — non-trainable (no grad; optimizers skip them; checkpoints save them).
//
// Training (forward with training=true on a trainable layer): each channel is normalised with the
// statistics of the batch over every axis but the last, mean and *biased* variance (divide by the
// count, as keras.ops.moments), y = (x - mean) / sqrt(var + epsilon) * gamma + beta, and the
// moving statistics move as Keras 3 moves them:
//   moving_mean     = moving_mean     * momentum + mean * (1 - momentum)
//   moving_variance = moving_variance * momentum + var  * (1 - momentum)   (biased var, as Keras 3
//                     and tf.keras, which removes the fused kernel's Bessel correction; PyTorch's
//                     running_var uses the unbiased one instead)
// backward goes through the batch statistics (the full batch-norm gradient). A batch of one
// sample without other axes has variance 0: it normalises to beta with gradient 0 to its input.
//
// A Keras mask (sequences (batch, steps, features) whose padding steps Embedding's mask_zero or
// Masking leaves out) is read as Keras 3 reads it (its `_moments(inputs, mask)`; tf.keras 2's
// weighted moments the same): in training the statistics are those of the kept steps alone —
// mean Σ m·x / Σ m, variance Σ m·(x - mean)² / Σ m, none kept giving 0 and 0 — every step is
// normalized with them, and only the kept steps get the statistics' part of the gradient. The
// mask passes on to the output (Keras' supports_masking). Inputs with more axes per step are
// refused when masked (Keras' mask would not broadcast against them).
//
// Inference (training=false), or a layer with trainable=false (Keras 3 runs a frozen
// BatchNormalization in inference mode and leaves its moving statistics alone): the affine map
// y = (x - moving_mean) / sqrt(moving_variance + epsilon) * gamma + beta.
//
// Replicas: a replica runs this layer on its own shard of the batch, so in training each replica
// normalises with its shard's statistics (like Keras' multi_gpu_model, not SyncBatchNorm:
// `synchronized` must be false) and updates its own moving statistics from them. The moving
// statistics are not all-reduced (they have no gradient), so they drift apart per replica; the
// template is replica 0 and holds the statistics of the first shard of each batch.
//
// Followed by a relu (an Activation layer that is its only reader, nn::ReluAbsorber) the layer
// applies that relu itself: it outputs max(0, y) and its backward receives the gradient of that.
//
// All reductions use a fixed split of the rows into blocks, summed in block order: results are
// bitwise the same whatever the number of threads.
#pragma once

#include <vector>

#include "backend/ops.hpp"

#include "nn/initializer.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct BatchNormalizationOptions {
  /// -1, or the positive index of the last axis counting the batch axis (tf.keras saves [3] for
  /// (None, h, w, c) inputs); checked against the input rank in build().
  std::int64_t axis = -1;
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  /// Keras' `synchronized`: batch statistics over the whole global batch (every replica of every
  /// rank) instead of each replica's shard; the meta-model then equals the template exactly.
  bool synchronized = false;
  Initializer beta_initializer{"zeros", std::nullopt, 0};
  Initializer gamma_initializer{"ones", std::nullopt, 0};
  Initializer moving_mean_initializer{"zeros", std::nullopt, 0};
  Initializer moving_variance_initializer{"ones", std::nullopt, 0};
};

class BatchNormalization : public Layer,
                           public CrossReplicaStatistics,
                           public ReluAbsorber,
                           public MaskedSteps {
 public:
  BatchNormalization(std::string name, BatchNormalizationOptions options);
  std::string class_name() const override { return "BatchNormalization"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  /// Always: synchronized, the batch statistics are summed; otherwise the moving statistics are
  /// averaged over the replicas after each training forward (see forward()).
  bool wants_cross_replica_sum() const override { return true; }
  void set_cross_replica_sum(backend::SumAcrossReplicas sum) override {
    cross_replica_ = std::move(sum);
  }
  std::vector<Parameter*> moving_state() override { return {&moving_mean_, &moving_variance_}; }
  void average_moving_state(std::int64_t rows) override {
    if (cross_replica_) average_moving_statistics(rows);
  }
  /// As forward() with rows would: the moving statistics' average (not synchronized, training).
  void forward_without_rows() override {
    if (trainable() && cross_replica_ && !options_.synchronized) average_moving_statistics(0);
  }
  void set_absorb_output_relu(bool absorb) override;
  bool absorbs_output_relu() const { return output_relu_; }
  nlohmann::json config() const override;
  /// A masked input keeps its mask; refused (ShapeError) unless the input is (steps, features).
  bool output_masked(bool input_masked) const override;
  void set_input_mask(const Tensor* mask) override { mask_ = mask; }
  const Tensor* output_mask() const override { return mask_; }

 private:
  BatchNormalizationOptions options_;
  Shape input_shape_;
  std::int64_t channels_ = 0;
  bool output_relu_ = false;  // applies the reading layer's relu (set_absorb_output_relu)
  Parameter gamma_, beta_, moving_mean_, moving_variance_;
  /// The backend's batch normalization (made again after a backend change).
  backend::BatchNorm& normalization();

  std::unique_ptr<backend::BatchNorm> normalization_;  // keeps the last forward's statistics
  const backend::Backend* normalization_backend_ = nullptr;
  backend::SumAcrossReplicas cross_replica_;  // set on several replicas
  /// The backend's sum for the batch statistics: cross_replica_ when synchronized, else none.
  backend::SumAcrossReplicas statistics_sum() const;
  /// Not synchronized, on several replicas: the moving statistics become their average over the
  /// replicas weighted by each one's `rows`, the same on every replica.
  void average_moving_statistics(std::int64_t rows);
  const Tensor* mask_ = nullptr;  // the input's Keras mask (borrowed until the next forward)
  Tensor input_;  // the last forward's input (shared storage, not a copy)
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
