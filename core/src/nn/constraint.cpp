#include "nn/constraint.hpp"

#include <cmath>
#include <memory>

#include "backend/ops.hpp"
#include "nn/layer_extensions.hpp"
#include "nn/layer_indices.hpp"
#include "tandem/error.hpp"
#include "util/config_object.hpp"

namespace tandem::nn {

namespace {

using nlohmann::json;
using Kind = backend::ConstraintDesc::Kind;

struct Known {
  Kind kind;
  const char* name;
  const char* class_name;
  std::vector<const char*> aliases;  // Keras 2's
};

const std::vector<Known>& known() {
  static const std::vector<Known> table = {
      {Kind::max_norm, "max_norm", "MaxNorm", {"maxnorm"}},
      {Kind::non_neg, "non_neg", "NonNeg", {"nonneg"}},
      {Kind::unit_norm, "unit_norm", "UnitNorm", {"unitnorm"}},
      {Kind::min_max_norm, "min_max_norm", "MinMaxNorm", {}},
  };
  return table;
}

const Known& info_of(Kind kind) {
  for (const Known& k : known())
    if (k.kind == kind) return k;
  return known().front();
}

std::vector<std::int64_t> read_axes(ConfigObject& cfg) {
  const json* v = cfg.find("axis");
  if (!v) return {0};
  std::vector<std::int64_t> axes;
  const json list = v->is_array() ? *v : json::array({*v});
  for (const json& a : list) {
    if (!a.is_number_integer())
      throw ConfigError(cfg.path_of("axis"), "expected an axis or a list of axes, got " + v->dump());
    axes.push_back(a.get<std::int64_t>());
  }
  if (axes.empty()) throw ConfigError(cfg.path_of("axis"), "expected at least one axis");
  return axes;
}

void read_config(ConfigObject& cfg, Constraint& c) {
  if (c.kind == Kind::non_neg) {
    cfg.finish();
    return;
  }
  c.axes = read_axes(cfg);
  if (c.kind == Kind::max_norm) c.max_value = cfg.number_in("max_value", 2.0, 0.0, 1e30);
  if (c.kind == Kind::min_max_norm) {
    c.min_value = cfg.number_in("min_value", 0.0, 0.0, 1e30);
    c.max_value = cfg.number_in("max_value", 1.0, 0.0, 1e30);
    c.rate = cfg.number_in("rate", 1.0, 0.0, 1.0);
    if (c.max_value < c.min_value)
      throw ConfigError(cfg.path_of("max_value"), "must not be below min_value");
  }
  cfg.finish();
}

}  // namespace

std::optional<Constraint> parse_constraint(const json& spec, const std::string& path) {
  if (spec.is_null()) return std::nullopt;
  const KerasObject o = read_keras_object(spec, path, "a constraint name");
  const std::string& name = o.name;
  Constraint c;
  const Known* found = find_keras_name(known(), name);
  if (!found)
    throw ConfigError(o.name_path, "unknown constraint '" + name +
                                     "' (known: MaxNorm, NonNeg, UnitNorm, MinMaxNorm)");
  c.kind = found->kind;
  static const json empty = json::object();
  ConfigObject cfg(o.config ? *o.config : empty, o.config_path);
  read_config(cfg, c);
  return c;
}

json Constraint::config() const {
  json cfg = json::object();
  if (kind != Kind::non_neg) cfg["axis"] = axes.size() == 1 ? json(axes[0]) : json(axes);
  if (kind == Kind::max_norm) cfg["max_value"] = max_value;
  if (kind == Kind::min_max_norm) {
    cfg["min_value"] = min_value;
    cfg["max_value"] = max_value;
    cfg["rate"] = rate;
  }
  return {{"class_name", info_of(kind).class_name}, {"config", cfg}};
}

backend::ConstraintDesc Constraint::desc_for(const Shape& shape) const {
  backend::ConstraintDesc d;
  d.kind = kind;
  d.max_value = static_cast<float>(max_value);
  d.min_value = static_cast<float>(min_value);
  d.rate = static_cast<float>(rate);
  const auto rank = static_cast<std::int64_t>(shape.size());
  if (rank < 1 || rank > backend::AxisGroups::kMaxRank)
    throw ShapeError("a constraint on a weight of shape " + shape_to_string(shape));
  d.axes.rank = static_cast<int>(rank);
  for (std::int64_t a = 0; a < rank; ++a) d.axes.dims[a] = shape[static_cast<std::size_t>(a)];
  if (kind != Kind::non_neg)
    for (std::int64_t axis : axes) {
      const std::int64_t a = axis < 0 ? axis + rank : axis;
      if (a < 0 || a >= rank)
        throw ShapeError("constraint axis " + std::to_string(axis) +
                         " is not an axis of its weight, of shape " + shape_to_string(shape));
      d.axes.grouped[a] = true;
    }
  backend::count_groups(d.axes);
  return d;
}

void WeightConstraint::build(const Shape& weight_shape) {
  if (constraint_) desc_ = constraint_->desc_for(weight_shape);
}

void WeightConstraint::apply(backend::Backend& ops, Tensor& weight) const {
  if (constraint_) ops.apply_constraint(desc_, weight);
}

json WeightConstraint::config() const {
  return constraint_ ? constraint_->config() : json(nullptr);
}

void apply_constraints(Model& model) {
  apply_constraints(model, every_layer(model));
}

void apply_constraints(Model& model, const std::vector<std::size_t>& layers) {
  for (std::size_t l : layers) {
    Layer& layer = model.layer(l);
    WeightRules* rules = weight_rules_of(layer);
    if (!rules || !layer.trainable()) continue;
    for (const RuledWeight& w : rules->ruled_weights())
      if (w.constraint && w.weight->trainable) w.constraint->apply(layer.ops(), w.weight->value);
  }
}

}  // namespace tandem::nn
