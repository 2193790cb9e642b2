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
  virtual void check_shapes(const Shape& output, const Shape& target) const = 0;
  /// Sum over the batch of the per-sample loss. If `grad` is not null it is resized to pred's
  /// shape and set to grad_scale * d(sum)/d(pred).
  virtual double compute(const Tensor& pred, const Tensor& target, float grad_scale,
                         Tensor* grad) const = 0;
  /// The loss as the backends compute it (backend/kernel_math.hpp), for device replicas.
  virtual backend::LossDesc desc() const = 0;
};

/// Which Keras a loss follows where Keras 2 and 3 define it differently (backend::LossDesc's
/// keras2): the model's (Model::keras2()).
enum class KerasDefinitions { keras3, keras2 };

/// "mse" or "sparse_categorical_crossentropy" or
/// {"class_name": "BinaryCrossentropy", "config": {"from_logits": true}}. Throws ConfigError.
std::unique_ptr<Loss> make_loss(const nlohmann::json& spec, const std::string& path,
                                KerasDefinitions definitions = KerasDefinitions::keras3);

}  // namespace tandem

TANDEM_INTERNAL_API_END
