// Loss functions (Keras names and semantics). Stateless and thread-safe.
//
// compute() returns the *sum* of per-sample losses over the batch and, when asked, the gradient
// of that sum scaled by `grad_scale`. The trainer passes grad_scale = 1 / global batch size, so a
// replica holding part of a batch produces exactly its share of the gradient of the batch mean
// (docs/design.md contract 1).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

namespace backend {
struct LossDesc;
}  // namespace backend

class Loss {
 public:
  virtual ~Loss() = default;
  /// Keras function name: "sparse_categorical_crossentropy".
  virtual std::string name() const = 0;
  virtual nlohmann::json config() const = 0;
  /// Whether the loss reads the model's outputs as logits rather than probabilities.
  virtual bool from_logits() const { return false; }
  /// Throws ShapeError when the model output and target shapes (per sample) cannot go together.
  /// A categorical loss takes the output's last axis as its classes, at every position.
  virtual void check_shapes(const Shape& output, const Shape& target) const = 0;
  /// Sum over the batch of the per-sample loss (for an output with positions, the mean of its
  /// positions' losses). If `grad` is not null it is resized to pred's shape and set to
  /// grad_scale * d(sum)/d(pred).
  virtual double compute(const Tensor& pred, const Tensor& target, float grad_scale,
                         Tensor* grad) const = 0;
  /// The loss as the backends compute it (backend/kernel_math.hpp), for device replicas.
  virtual backend::LossDesc desc() const = 0;
};

/// The positions of an output of per-sample shape `sample_shape` that the losses and metrics of
/// its last axis average over (backend::LossDesc::positions): its values over the last axis'
/// (a sequence's steps, an image's pixels); 1 for a vector. A zero-sized axis gives 0.
std::int64_t positions_of(const Shape& sample_shape);
/// positions_of a batch's per-sample shape (every axis of `batch` but the first).
std::int64_t positions_of_batch(const Tensor& batch);

/// Which Keras a loss follows where Keras 2 and 3 define it differently (backend::LossDesc's
/// keras2): the model's (Model::keras2()).
enum class KerasDefinitions { keras3, keras2 };

/// "mse" or "sparse_categorical_crossentropy" or
/// {"class_name": "BinaryCrossentropy", "config": {"from_logits": true}}. Throws ConfigError.
std::unique_ptr<Loss> make_loss(const nlohmann::json& spec, const std::string& path,
                                KerasDefinitions definitions = KerasDefinitions::keras3);

}  // namespace tandem

TANDEM_INTERNAL_API_END
