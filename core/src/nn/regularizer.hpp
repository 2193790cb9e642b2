// Keras' weight regularizers (kernel_regularizer, bias_regularizer, embeddings_regularizer):
// L1, L2 and L1L2 in Keras' config form. A regularized weight adds l1·Σ|w| + l2·Σw² to the
// loss Keras reports (once per step, however the batch is split: each replica adds it per row)
// and l1·sign(w) + 2·l2·w to its gradient before the optimizer step (on every replica alike,
// after the replicas' gradients were summed). The arithmetic is kernel_math's penalty_*.
// Plain values; the functions keep no state.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class Model;

namespace backend {
class Backend;
class Sums;
}  // namespace backend

namespace nn {

struct Regularizer {
  double l1 = 0, l2 = 0;
  /// {"class_name": "L2", "config": {"l2": 0.01}} (L1, L2 or L1L2, as the config named it).
  nlohmann::json config() const;
  std::string class_name = "L1L2";
};

/// Reads a Keras regularizer (class form, or a name: "l1", "l2", "l1_l2" with Keras 3's
/// defaults); nothing for null. Throws ConfigError naming `path`.
std::optional<Regularizer> parse_regularizer(const nlohmann::json& spec, const std::string& path);

/// A weight's regularizer as its layer keeps it (none by default).
class WeightRegularizer {
 public:
  WeightRegularizer() = default;
  explicit WeightRegularizer(std::optional<Regularizer> r) : regularizer_(std::move(r)) {}
  bool active() const { return regularizer_.has_value(); }
  /// Queues the weight's penalty into sums[slot] (on `ops`' device).
  void enqueue_penalty(backend::Backend& ops, const Tensor& weight, backend::Sums& sums,
                       std::size_t slot) const;
  /// grad += the penalty's gradient.
  void add_gradient(backend::Backend& ops, const Tensor& weight, Tensor& grad) const;
  nlohmann::json config() const;

 private:
  std::optional<Regularizer> regularizer_;
};

/// The sum of every layer's weight penalties (Keras' regularization losses), computed on the
/// layers' backend through `sums` (one of that backend's; reset here). 0 without regularizers.
/// With `layers` (ascending indices; a pipeline stage's, all on one backend): theirs only.
double weight_penalty(Model& model, backend::Sums& sums);
double weight_penalty(Model& model, backend::Sums& sums, const std::vector<std::size_t>& layers);
/// Adds every trainable regularized weight's penalty gradient to its gradient (of `layers`).
void add_penalty_gradients(Model& model);
void add_penalty_gradients(Model& model, const std::vector<std::size_t>& layers);

}  // namespace nn
}  // namespace tandem

TANDEM_INTERNAL_API_END
