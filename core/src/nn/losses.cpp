// Keras losses (the table in losses() below): what differs between them is data, a
// backend::LossDesc; their arithmetic is backend/kernel_math.hpp's loss_row on every device.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "backend/ops.hpp"
#include "nn/loss.hpp"
#include "tandem/error.hpp"
#include "util/config_object.hpp"

namespace tandem {

namespace {

using nlohmann::json;

std::int64_t rows_of(const Tensor& t) {
  return t.rank() > 0 ? t.dim(0) : 1;
}

// A per-sample output's shape without its last axis: the shape of its positions.
Shape positions_shape(const Shape& output) {
  return output.size() <= 1 ? Shape{1} : Shape(output.begin(), output.end() - 1);
}

// Whether per-sample targets of shape `target` hold one class index per position of `output`,
// as Keras takes them: the output's shape without its last axis, or with a last axis of one.
bool holds_class_indices(const Shape& target, const Shape& output) {
  if (output.size() <= 1) return shape_size(target) == 1;
  Shape with_axis = positions_shape(output);
  with_axis.push_back(1);
  return target == positions_shape(output) || target == with_axis;
}

using LossKind = backend::LossDesc::Kind;

// Every loss Tandem knows: its Keras function name (what the history and config say), class
// name, other accepted names, and which config keys it takes beyond reduction and name.
struct LossInfo {
  LossKind kind;
  const char* name;
  const char* class_name;
  std::vector<const char*> aliases;
  bool logits = false;     // from_logits
  bool smoothing = false;  // label_smoothing
  bool delta = false;      // Huber's delta
  bool axis = false;       // CosineSimilarity's axis (the last only)
};

const std::vector<LossInfo>& losses() {
  static const std::vector<LossInfo> table = {
      {LossKind::mse, "mean_squared_error", "MeanSquaredError", {"mse"}},
      {LossKind::mae, "mean_absolute_error", "MeanAbsoluteError", {"mae"}},
      {LossKind::bce, "binary_crossentropy", "BinaryCrossentropy", {}, true, true},
      {LossKind::cce, "categorical_crossentropy", "CategoricalCrossentropy", {}, true, true},
      {LossKind::scce,
       "sparse_categorical_crossentropy",
       "SparseCategoricalCrossentropy",
       {},
       true},
      {LossKind::huber, "huber", "Huber", {"huber_loss"}, false, false, true},
      {LossKind::hinge, "hinge", "Hinge", {}},
      {LossKind::squared_hinge, "squared_hinge", "SquaredHinge", {}},
      {LossKind::kl_divergence,
       "kl_divergence",
       "KLDivergence",
       {"kld", "KLD", "kullback_leibler_divergence"}},
      {LossKind::log_cosh, "log_cosh", "LogCosh", {"logcosh"}},
      {LossKind::poisson, "poisson", "Poisson", {}},
      {LossKind::cosine_similarity,
       "cosine_similarity",
       "CosineSimilarity",
       {},
       false,
       false,
       false,
       true},
  };
  return table;
}

const LossInfo* find_loss(const std::string& n) {
  return find_keras_name(losses(), n);
}

const LossInfo& info_of(LossKind kind) {
  for (const LossInfo& info : losses())
    if (info.kind == kind) return info;
  throw std::logic_error("a loss kind without an entry in losses()");
}

class KerasLoss : public Loss {
 public:
  explicit KerasLoss(const backend::LossDesc& desc) : desc_(desc) {}
  std::string name() const override { return info_of(desc_.kind).name; }
  bool from_logits() const override { return desc_.from_logits; }
  backend::LossDesc desc() const override { return desc_; }

  json config() const override {
    const LossInfo& info = info_of(desc_.kind);
    if (desc_.kind == LossKind::mse || desc_.kind == LossKind::mae) return name();
    json c = json::object();
    if (info.logits) c["from_logits"] = desc_.from_logits;
    if (info.smoothing) c["label_smoothing"] = desc_.label_smoothing;
    if (info.delta) c["delta"] = desc_.delta;
    if (info.axis) c["axis"] = -1;
    if (desc_.kind == LossKind::scce)
      c["ignore_class"] = desc_.ignores_class ? json(static_cast<int>(desc_.ignore_class)) : json();
    return {{"class_name", info.class_name}, {"config", c}};
  }

  void check_shapes(const Shape& output, const Shape& target) const override {
    // One value per sample against several outputs: most often class indices given to a loss
    // that wants one-hot targets (Keras users' usual slip).
    const std::string hint =
        shape_size(target) == 1 && shape_size(output) > 1
            ? " (class indices? sparse_categorical_crossentropy takes them; this loss wants "
              "targets of the output's shape, one-hot for classes)"
            : "";
    if (!categorical()) {
      if (shape_size(output) != shape_size(target))
        throw ShapeError(name() + ": targets " + shape_to_string(target, true) +
                         " do not match model outputs " + shape_to_string(output, true) + hint);
      return;
    }
    const bool sparse = desc_.kind == backend::LossDesc::Kind::scce;
    if (output.empty())
      throw ShapeError(name() +
                       " needs model outputs (None, classes) or (None, ..., classes), "
                       "got " +
                       shape_to_string(output, true));
    if (sparse ? !holds_class_indices(target, output) : target != output)
      throw ShapeError(
          name() + ": targets " + shape_to_string(target, true) +
          (sparse ? " must hold one class index " +
                        (output.size() == 1
                             ? std::string("per sample")
                             : "per position of model outputs " + shape_to_string(output, true) +
                                   ", " + shape_to_string(positions_shape(output), true))
                  : " do not match model outputs " + shape_to_string(output, true) + hint));
  }

  double compute(const Tensor& pred, const Tensor& target, float grad_scale,
                 Tensor* grad) const override {
    if (rows_of(pred) != rows_of(target))
      throw ShapeError(name() + ": predictions have " + std::to_string(rows_of(pred)) +
                       " samples, targets " + std::to_string(rows_of(target)));
    const std::int64_t rows = rows_of(pred);
    const std::int64_t cols = pred.size() / std::max<std::int64_t>(rows, 1);
    backend::LossDesc desc = desc_;
    desc.positions = positions_of_batch(pred);
    const bool sparse = desc_.kind == backend::LossDesc::Kind::scce;
    if (sparse ? target.size() != rows * desc.positions : target.size() != pred.size())
      throw ShapeError(name() + ": targets " + shape_to_string(target.shape()) +
                       (categorical() ? " do not fit predictions " : " do not match predictions ") +
                       shape_to_string(pred.shape()));
    backend::Backend& ops = backend::cpu_backend();
    auto sums = ops.sums();
    sums->reset(1);
    ops.loss_sum(desc, pred, target, {}, cols, grad_scale, grad, *sums, 0);
    return sums->read()[0];
  }

 private:
  bool categorical() const {
    return desc_.kind == backend::LossDesc::Kind::cce ||
           desc_.kind == backend::LossDesc::Kind::scce;
  }

  backend::LossDesc desc_;
};

}  // namespace

std::int64_t positions_of(const Shape& sample_shape) {
  if (sample_shape.size() <= 1) return 1;
  return sample_shape.back() == 0 ? 0 : shape_size(sample_shape) / sample_shape.back();
}

std::int64_t positions_of_batch(const Tensor& batch) {
  if (batch.rank() <= 2) return 1;
  return positions_of(Shape(batch.shape().begin() + 1, batch.shape().end()));
}

std::unique_ptr<Loss> make_loss(const json& spec, const std::string& path,
                                KerasDefinitions definitions) {
  const KerasObject o = read_keras_object(spec, path, "a loss name");
  const std::string& name = o.name;
  const LossInfo* info = find_loss(name);
  if (!info) {
    std::string known;
    for (const LossInfo& i : losses()) known += (known.empty() ? "" : ", ") + std::string(i.name);
    throw ConfigError(o.name_path, "unknown loss '" + name + "' (known: " + known + ")");
  }
  backend::LossDesc desc;
  desc.kind = info->kind;
  desc.keras2 = definitions == KerasDefinitions::keras2;
  if (o.config) {
    ConfigObject cfg(*o.config, o.config_path);
    if (info->logits) desc.from_logits = cfg.get_bool("from_logits", false);
    if (info->smoothing)
      desc.label_smoothing = static_cast<float>(cfg.number_in("label_smoothing", 0.0, 0.0, 1.0));
    if (info->delta) {
      desc.delta = static_cast<float>(cfg.get_number("delta", 1.0));
      if (!(desc.delta > 0) || !std::isfinite(desc.delta))
        throw ConfigError(cfg.path_of("delta"),
                          "expected a positive number, got " + cfg.at("delta").dump());
    }
    // Keras puts `axis` on some losses; on any, only the last axis is what Tandem computes.
    if (const json* axis = cfg.find("axis"); axis && *axis != -1)
      throw ConfigError(cfg.path_of("axis"),
                        "only the last axis (-1) is supported, got " + axis->dump());
    if (desc.kind == LossKind::mse || desc.kind == LossKind::mae) cfg.ignore({"from_logits"});
    cfg.one_of("reduction", "sum_over_batch_size", {"sum_over_batch_size", "auto"});
    if (desc.kind == LossKind::scce && cfg.has("ignore_class")) {
      // Labels travel as float32 values: every integer up to 2^24 is one exactly.
      const std::int64_t ignored = cfg.get_int("ignore_class");
      if (ignored < -(1 << 24) || ignored > (1 << 24))
        throw ConfigError(cfg.path_of("ignore_class"),
                          "expected a class of at most 2^24 in magnitude (labels are float32 "
                          "values), got " +
                              std::to_string(ignored));
      desc.ignores_class = true;
      desc.ignore_class = static_cast<float>(ignored);
    } else if (cfg.has("ignore_class")) {
      throw ConfigError(cfg.path_of("ignore_class"),
                        "only SparseCategoricalCrossentropy ignores a class (Keras' key of "
                        "sparse labels); give null or leave it out");
    }
    cfg.ignore({"name", "axis", "dtype", "ignore_class"});
    cfg.finish();
  }
  return std::make_unique<KerasLoss>(desc);
}

}  // namespace tandem
