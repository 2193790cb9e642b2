// Keras losses: mean_squared_error, mean_absolute_error, binary_crossentropy,
// categorical_crossentropy, sparse_categorical_crossentropy (from probabilities or logits).
#include <algorithm>

#include "backend/ops.hpp"
#include "util/config_object.hpp"
#include "tandem/error.hpp"
#include "nn/loss.hpp"

namespace tandem {

namespace {

using nlohmann::json;

std::int64_t rows_of(const Tensor& t) {
  return t.rank() > 0 ? t.dim(0) : 1;
}

std::string loss_name(backend::LossDesc::Kind kind) {
  switch (kind) {
    case backend::LossDesc::Kind::mse:
      return "mean_squared_error";
    case backend::LossDesc::Kind::mae:
      return "mean_absolute_error";
    case backend::LossDesc::Kind::bce:
      return "binary_crossentropy";
    case backend::LossDesc::Kind::cce:
      return "categorical_crossentropy";
    case backend::LossDesc::Kind::scce:
      return "sparse_categorical_crossentropy";
  }
  return "";
}

// Every Keras loss Tandem knows: what differs is data (the descriptor); the arithmetic is the
// backend's (backend/kernel_math.hpp's loss_row on every device).
class KerasLoss : public Loss {
 public:
  explicit KerasLoss(const backend::LossDesc& desc) : desc_(desc) {}
  std::string name() const override { return loss_name(desc_.kind); }
  bool from_logits() const override { return desc_.from_logits; }
  backend::LossDesc desc() const override { return desc_; }

  json config() const override {
    using Kind = backend::LossDesc::Kind;
    switch (desc_.kind) {
      case Kind::mse:
      case Kind::mae:
        return name();
      case Kind::bce:
        return {{"class_name", "BinaryCrossentropy"},
                {"config",
                 {{"from_logits", desc_.from_logits}, {"label_smoothing", desc_.label_smoothing}}}};
      case Kind::cce:
        return {{"class_name", "CategoricalCrossentropy"},
                {"config",
                 {{"from_logits", desc_.from_logits}, {"label_smoothing", desc_.label_smoothing}}}};
      case Kind::scce:
        return {{"class_name", "SparseCategoricalCrossentropy"},
                {"config", {{"from_logits", desc_.from_logits}}}};
    }
    return name();
  }

  void check_shapes(const Shape& output, const Shape& target) const override {
    if (!categorical()) {
      if (shape_size(output) != shape_size(target))
        throw ShapeError(name() + ": targets " + shape_to_string(target, true) +
                         " do not match model outputs " + shape_to_string(output, true));
      return;
    }
    const bool sparse = desc_.kind == backend::LossDesc::Kind::scce;
    if (output.size() != 1)
      throw ShapeError(name() + " needs model outputs (None, classes), got " +
                       shape_to_string(output, true));
    if (sparse ? shape_size(target) != 1 : target != output)
      throw ShapeError(name() + ": targets " + shape_to_string(target, true) +
                       (sparse ? " must hold one class index per sample"
                               : " do not match model outputs " + shape_to_string(output, true)));
  }

  double compute(const Tensor& pred, const Tensor& target, float grad_scale,
                 Tensor* grad) const override {
    if (rows_of(pred) != rows_of(target))
      throw ShapeError(name() + ": predictions have " + std::to_string(rows_of(pred)) +
                       " samples, targets " + std::to_string(rows_of(target)));
    const std::int64_t rows = rows_of(pred);
    const std::int64_t cols = pred.size() / std::max<std::int64_t>(rows, 1);
    const bool sparse = desc_.kind == backend::LossDesc::Kind::scce;
    if (sparse ? target.size() != rows : target.size() != pred.size())
      throw ShapeError(name() + ": targets " + shape_to_string(target.shape()) +
                       (categorical() ? " do not fit predictions " : " do not match predictions ") +
                       shape_to_string(pred.shape()));
    backend::Backend& ops = backend::cpu_backend();
    auto sums = ops.sums();
    sums->reset(1);
    ops.loss_sum(desc_, pred, target, cols, grad_scale, grad, *sums, 0);
    return sums->read()[0];
  }

 private:
  bool categorical() const {
    return desc_.kind == backend::LossDesc::Kind::cce || desc_.kind == backend::LossDesc::Kind::scce;
  }

  backend::LossDesc desc_;
};

std::string canonical_loss_name(const std::string& n) {
  if (n == "mse" || n == "mean_squared_error" || n == "MeanSquaredError") return "mse";
  if (n == "mae" || n == "mean_absolute_error" || n == "MeanAbsoluteError") return "mae";
  if (n == "binary_crossentropy" || n == "BinaryCrossentropy") return "bce";
  if (n == "categorical_crossentropy" || n == "CategoricalCrossentropy") return "cce";
  if (n == "sparse_categorical_crossentropy" || n == "SparseCategoricalCrossentropy") return "scce";
  return "";
}

}  // namespace

std::unique_ptr<Loss> make_loss(const json& spec, const std::string& path) {
  std::string name;
  bool from_logits = false;
  double smoothing = 0.0;
  std::string name_path = path;
  if (spec.is_string()) {
    name = spec.get<std::string>();
  } else if (spec.is_object()) {
    ConfigObject obj(spec, path);
    name = obj.get_string("class_name");
    name_path = obj.path_of("class_name");
    obj.ignore({"module", "registered_name"});
    if (obj.has("config")) {
      ConfigObject cfg = obj.get_object("config");
      from_logits = cfg.get_bool("from_logits", false);
      const std::string canon = canonical_loss_name(name);
      if (canon == "bce" || canon == "cce")
        smoothing = cfg.number_in("label_smoothing", 0.0, 0.0, 1.0);
      if (canon == "mse" || canon == "mae") cfg.ignore({"from_logits"});
      cfg.one_of("reduction", "sum_over_batch_size", {"sum_over_batch_size", "auto"});
      cfg.ignore({"name", "axis"});
      cfg.finish();
    }
    obj.finish();
  } else {
    throw ConfigError(path,
                      "expected a loss name or {\"class_name\": ...}, got " + json_type_name(spec));
  }
  const std::string canon = canonical_loss_name(name);
  using Kind = backend::LossDesc::Kind;
  backend::LossDesc desc;
  desc.from_logits = from_logits;
  desc.label_smoothing = static_cast<float>(smoothing);
  if (canon == "mse") desc.kind = Kind::mse;
  if (canon == "mae") desc.kind = Kind::mae;
  if (canon == "bce") desc.kind = Kind::bce;
  if (canon == "cce") desc.kind = Kind::cce;
  if (canon == "scce") desc.kind = Kind::scce;
  if (canon == "mse" || canon == "mae") desc.from_logits = false;
  if (!canon.empty()) return std::make_unique<KerasLoss>(desc);
  throw ConfigError(name_path,
                    "unknown loss '" + name +
                        "' (known: mean_squared_error, mean_absolute_error, binary_crossentropy, "
                        "categorical_crossentropy, sparse_categorical_crossentropy)");
}

}  // namespace tandem
