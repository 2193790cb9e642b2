#include "nn/regularizer.hpp"

#include <cmath>
#include <memory>

#include "backend/ops.hpp"
#include "nn/layer_extensions.hpp"
#include "nn/layer_indices.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "util/config_object.hpp"

namespace tandem::nn {

namespace {

using nlohmann::json;

double read_factor(ConfigObject& cfg, const char* key, double fallback) {
  const double v = cfg.get_number(key, fallback);
  if (!(v >= 0) || !std::isfinite(v))
    throw ConfigError(cfg.path_of(key), "expected a finite factor >= 0, got " + cfg.at(key).dump());
  return v;
}

}  // namespace

std::optional<Regularizer> parse_regularizer(const json& spec, const std::string& path) {
  if (spec.is_null()) return std::nullopt;
  Regularizer r;
  const KerasObject o = read_keras_object(spec, path, "a regularizer name");
  const std::string& name = o.name;
  // Keras 3's defaults: l1(0.01), l2(0.01), L1L2(0, 0) (also by its snake-case name "l1l2").
  // tf.keras 2's deserialize() takes the string "l1_l2" as L1L2(0.01, 0.01).
  if (name == "L1" || name == "l1") {
    r.class_name = "L1", r.l1 = 0.01;
  } else if (name == "L2" || name == "l2") {
    r.class_name = "L2", r.l2 = 0.01;
  } else if (name == "L1L2" || name == "l1l2" || name == "l1_l2") {
    r.class_name = "L1L2";
    if (name == "l1_l2" && !o.config) r.l1 = r.l2 = 0.01;
  } else {
    throw ConfigError(o.name_path, "unknown regularizer '" + name + "' (known: L1, L2, L1L2)");
  }
  static const json empty = json::object();
  ConfigObject cfg(o.config ? *o.config : empty, o.config_path);
  if (r.class_name != "L2") r.l1 = read_factor(cfg, "l1", r.l1);
  if (r.class_name != "L1") r.l2 = read_factor(cfg, "l2", r.l2);
  cfg.finish();
  return r;
}

json Regularizer::config() const {
  json cfg = json::object();
  if (class_name != "L2") cfg["l1"] = l1;
  if (class_name != "L1") cfg["l2"] = l2;
  return {{"class_name", class_name}, {"config", cfg}};
}

void WeightRegularizer::enqueue_penalty(backend::Backend& ops, const Tensor& weight,
                                        backend::Sums& sums, std::size_t slot) const {
  if (regularizer_)
    ops.penalty_sum(weight, static_cast<float>(regularizer_->l1),
                    static_cast<float>(regularizer_->l2), sums, slot);
}

void WeightRegularizer::add_gradient(backend::Backend& ops, const Tensor& weight,
                                     Tensor& grad) const {
  if (regularizer_)
    ops.add_penalty_gradient(weight, static_cast<float>(regularizer_->l1),
                             static_cast<float>(regularizer_->l2), grad);
}

json WeightRegularizer::config() const {
  return regularizer_ ? regularizer_->config() : json(nullptr);
}

namespace {

// Every regularized weight the layers use, with its layer.
struct Penalized {
  Layer* layer;
  const WeightRegularizer* regularizer;
  Parameter* weight;
};

std::vector<Penalized> penalized_weights(Model& model, const std::vector<std::size_t>& layers) {
  std::vector<Penalized> all;
  for (std::size_t l : layers)
    if (WeightRules* rules = weight_rules_of(model.layer(l)))
      for (const RuledWeight& w : rules->ruled_weights())
        if (w.regularizer && w.regularizer->active())
          all.push_back({&model.layer(l), w.regularizer, w.weight});
  return all;
}

}  // namespace

double weight_penalty(Model& model, backend::Sums& sums) {
  return weight_penalty(model, sums, every_layer(model));
}

double weight_penalty(Model& model, backend::Sums& sums, const std::vector<std::size_t>& layers) {
  std::vector<Penalized> all = penalized_weights(model, layers);
  // Keras 3 sums the penalties of trainable weights (Layer._get_regularization_losses); tf.keras
  // 2 those of every regularized weight, a frozen layer's too.
  if (!model.keras2())
    std::erase_if(
        all, [](const Penalized& w) { return !(w.layer->trainable() && w.weight->trainable); });
  if (all.empty()) return 0.0;
  sums.reset(all.size());
  for (std::size_t k = 0; k < all.size(); ++k)
    all[k].regularizer->enqueue_penalty(all[k].layer->ops(), all[k].weight->value, sums, k);
  double total = 0;
  for (double v : sums.read()) total += v;
  return total;
}

void add_penalty_gradients(Model& model) {
  add_penalty_gradients(model, every_layer(model));
}

void add_penalty_gradients(Model& model, const std::vector<std::size_t>& layers) {
  for (const Penalized& w : penalized_weights(model, layers))
    if (w.layer->trainable() && w.weight->trainable)
      w.regularizer->add_gradient(w.layer->ops(), w.weight->value, w.weight->grad);
}

}  // namespace tandem::nn
