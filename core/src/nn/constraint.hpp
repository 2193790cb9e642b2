// Keras' weight constraints (kernel_constraint, bias_constraint, embeddings_constraint): MaxNorm,
// NonNeg, UnitNorm and MinMaxNorm in Keras' config form, applied to a weight after each
// optimizer step (by every replica alike, so the meta-model contract holds; the arithmetic is
// kernel_math's constraint_*). Plain values; parse_constraint is a pure function.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/axis_groups.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {
class Model;
namespace backend {
class Backend;
}  // namespace backend
}  // namespace tandem

namespace tandem::nn {

struct Constraint {
  backend::ConstraintDesc::Kind kind = backend::ConstraintDesc::Kind::max_norm;
  double max_value = 2.0, min_value = 0.0, rate = 1.0;
  std::vector<std::int64_t> axes{0};  // Keras' `axis`: the axes each norm runs over

  /// {"class_name": "MaxNorm", "config": {"max_value": 2.0, "axis": 0}}.
  nlohmann::json config() const;
  /// The backend's description for a weight of `shape`; throws ShapeError for an axis the
  /// weight does not have.
  backend::ConstraintDesc desc_for(const Shape& shape) const;
};

/// A weight's constraint as its layer keeps it (none by default): made for the weight's shape
/// when the layer is built, applied after each optimizer step.
class WeightConstraint {
 public:
  WeightConstraint() = default;
  explicit WeightConstraint(std::optional<Constraint> c) : constraint_(std::move(c)) {}
  /// Throws ShapeError for an axis the weight does not have.
  void build(const Shape& weight_shape);
  /// The constraint on `weight` (on `ops`' device); nothing without one.
  void apply(backend::Backend& ops, Tensor& weight) const;
  /// Keras' config value: the constraint's, or null.
  nlohmann::json config() const;

 private:
  std::optional<Constraint> constraint_;
  backend::ConstraintDesc desc_;
};

/// Reads a Keras constraint (class form, or a name: "max_norm", "non_neg", "unit_norm",
/// "min_max_norm" and Keras 2's "maxnorm", "nonneg", "unitnorm"); nothing for null. Throws
/// ConfigError naming `path`.
std::optional<Constraint> parse_constraint(const nlohmann::json& spec, const std::string& path);

/// Applies every trainable layer's constraints to its trainable weights, in place on the
/// layers' backend (after an optimizer step of `model`); with `layers`, theirs only.
void apply_constraints(Model& model);
void apply_constraints(Model& model, const std::vector<std::size_t>& layers);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
