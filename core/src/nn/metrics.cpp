// Keras metrics: accuracy (binary / categorical / sparse categorical, chosen as Keras chooses),
// mean squared and mean absolute error, top-k accuracies, Precision and Recall. What differs
// between them is data (backend::MetricDesc); their arithmetic is kernel_math.hpp's metric_row.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "backend/ops.hpp"
#include "util/config_object.hpp"
#include "tandem/error.hpp"
#include "nn/histogram_metrics.hpp"
#include "nn/metric.hpp"

namespace tandem {

namespace {

using nlohmann::json;

using MetricKind = backend::MetricDesc::Kind;

// Every metric Tandem knows by name: its Keras function (or default) name, class name, other
// spellings, the denominator of a ratio metric, and which config keys its class form takes.
struct MetricInfo {
  MetricKind kind;
  const char* name;
  const char* class_name;
  std::vector<const char*> aliases;
  std::optional<MetricKind> count;  // a ratio: the sums of `kind` over the sums of `count`
  bool k = false;             // TopK: k
  bool thresholds = false;    // Precision and Recall: thresholds
  bool threshold = false;     // BinaryAccuracy: threshold
};

const std::vector<MetricInfo>& metrics() {
  static const std::vector<MetricInfo> table = {
      {MetricKind::binary_accuracy, "binary_accuracy", "BinaryAccuracy", {}, {}, false, false, true},
      {MetricKind::categorical_accuracy, "categorical_accuracy", "CategoricalAccuracy", {}, {}},
      {MetricKind::sparse_categorical_accuracy, "sparse_categorical_accuracy",
       "SparseCategoricalAccuracy", {}, {}},
      {MetricKind::mean_squared_error, "mean_squared_error", "MeanSquaredError", {"mse"}, {}},
      {MetricKind::mean_absolute_error, "mean_absolute_error", "MeanAbsoluteError", {"mae"}, {}},
      {MetricKind::top_k_categorical_accuracy, "top_k_categorical_accuracy", "TopKCategoricalAccuracy",
       {}, {}, true},
      {MetricKind::sparse_top_k_categorical_accuracy, "sparse_top_k_categorical_accuracy",
       "SparseTopKCategoricalAccuracy", {}, {}, true},
      {MetricKind::true_positives, "precision", "Precision", {}, MetricKind::predicted_positives, false, true},
      {MetricKind::true_positives, "recall", "Recall", {}, MetricKind::actual_positives, false, true},
  };
  return table;
}

const MetricInfo* find_metric(const std::string& n) { return find_keras_name(metrics(), n); }

class BuiltinMetric : public Metric {
 public:
  BuiltinMetric(std::string name, const MetricInfo& info, backend::MetricDesc desc)
      : name_(std::move(name)), info_(info), desc_(desc) {}
  std::string name() const override { return name_; }
  std::string kind() const override { return info_.name; }
  json config() const override {
    if (info_.threshold || info_.thresholds) return {{"threshold", desc_.threshold}};
    if (info_.k) return {{"k", desc_.k}};
    return json::object();
  }

  backend::MetricDesc desc() const override { return desc_; }
  bool ratio() const override { return info_.count.has_value(); }
  backend::MetricDesc count_desc() const override {
    backend::MetricDesc d = desc_;
    if (info_.count) d.kind = *info_.count;
    return d;
  }

  MetricSum evaluate(const Tensor& pred, const Tensor& target) const override {
    const std::int64_t rows = pred.rank() > 0 ? pred.dim(0) : 1;
    const std::int64_t cols = pred.size() / std::max<std::int64_t>(rows, 1);
    backend::Backend& ops = backend::cpu_backend();
    auto sums = ops.sums();
    sums->reset(2);
    ops.metric_sum(desc_, pred, target, {}, cols, *sums, 0);
    if (ratio()) ops.metric_sum(count_desc(), pred, target, {}, cols, *sums, 1);
    const std::vector<double> v = sums->read();
    return {v[0], info_.count ? v[1] : static_cast<double>(rows)};
  }

 private:
  std::string name_;
  const MetricInfo& info_;
  backend::MetricDesc desc_;
};

std::string known_metrics() {
  std::string known = "accuracy";
  for (const MetricInfo& info : metrics()) known += std::string(", ") + info.name;
  return known + ", AUC, MeanIoU, OneHotMeanIoU";
}

// A metric logged under another name (Keras' numbering of a name listed twice: auc_1), all else
// its own.
class RenamedMetric : public Metric {
 public:
  RenamedMetric(std::unique_ptr<Metric> metric, std::string name)
      : metric_(std::move(metric)), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::string kind() const override { return metric_->kind(); }
  json config() const override { return metric_->config(); }
  MetricSum evaluate(const Tensor& pred, const Tensor& target) const override {
    return metric_->evaluate(pred, target);
  }
  backend::MetricDesc desc() const override { return metric_->desc(); }
  bool ratio() const override { return metric_->ratio(); }
  backend::MetricDesc count_desc() const override { return metric_->count_desc(); }
  bool histogram() const override { return metric_->histogram(); }
  std::size_t parts() const override { return metric_->parts(); }
  double value(std::span<const MetricSum> parts) const override { return metric_->value(parts); }

 private:
  std::unique_ptr<Metric> metric_;
  std::string name_;
};

// "accuracy" as Keras (tf.keras 2 and Keras 3 alike) resolves it, from shapes alone: binary
// when the output's last axis has one unit, sparse when the targets are class indices (the
// sparse loss takes them), categorical otherwise (binary cross-entropy over several units too).
MetricKind resolved_accuracy(const Loss& loss, const Shape& output_shape) {
  if (!output_shape.empty() && output_shape.back() == 1) return MetricKind::binary_accuracy;
  if (loss.name() == "sparse_categorical_crossentropy") return MetricKind::sparse_categorical_accuracy;
  return MetricKind::categorical_accuracy;
}

// A class form's config: the log name (Keras' default unless `name` is given), k, thresholds.
std::string read_class_config(ConfigObject& cfg, const MetricInfo& info,
                              backend::MetricDesc& desc) {
  const std::string name = cfg.get_string("name", info.name);
  if (info.k) {
    const std::int64_t k = cfg.get_int("k", 5);
    if (k < 1 || k > 1000000) throw ConfigError(cfg.path_of("k"), "expected k >= 1");
    desc.k = static_cast<int>(k);
  }
  if (info.threshold || info.thresholds) {
    const char* key = info.threshold ? "threshold" : "thresholds";
    if (cfg.has(key))
      desc.threshold = static_cast<float>(cfg.number_in(key, 0.5, 0.0, 1.0));
    else
      cfg.ignore({key});
  }
  if (info.thresholds) {
    for (const char* key : {"top_k", "class_id"}) {
      if (cfg.has(key))
        throw ConfigError(cfg.path_of(key), std::string(info.class_name) +
                                                " counts every output element; " + key +
                                                " must be null");
      cfg.ignore({key});
    }
  }
  cfg.ignore({"dtype"});
  cfg.finish();
  return name;
}

// A metric reads the targets in the loss's form: one class index per sample for
// sparse_categorical_crossentropy, the output's shape otherwise. The sparse metrics read the
// former, every other one the latter (read in the other form, it would compare the wrong values).
void check_target_form(const MetricInfo& info, const Loss& loss, const std::string& path) {
  const bool sparse_metric = info.kind == MetricKind::sparse_categorical_accuracy ||
                             info.kind == MetricKind::sparse_top_k_categorical_accuracy;
  const bool sparse_targets = loss.desc().kind == backend::LossDesc::Kind::scce;
  if (sparse_metric == sparse_targets) return;
  if (sparse_targets)
    throw ConfigError(path,
                      std::string("metric '") + info.name +
                          "' compares each output value with a target of its own, but the "
                          "loss " +
                          loss.name() +
                          " gives one class index per sample (use sparse_categorical_accuracy "
                          "or sparse_top_k_categorical_accuracy, or one-hot targets with "
                          "categorical_crossentropy)");
  throw ConfigError(path, std::string("metric '") + info.name +
                              "' reads one class index per sample, but the loss " + loss.name() +
                              " takes targets of the output's shape (use categorical_accuracy or "
                              "top_k_categorical_accuracy)");
}

}  // namespace

std::vector<std::unique_ptr<Metric>> make_metrics(const json& list, const std::string& path,
                                                  const Loss& loss, const Shape& output_shape,
                                                  const std::vector<std::unique_ptr<Metric>>* plain,
                                                  KerasDefinitions definitions) {
  std::vector<std::unique_ptr<Metric>> out;
  // A name already taken is numbered as Keras numbers it (compile_utils' unique_name_counters):
  // two AUCs log auc and auc_1.
  const auto taken = [&](const std::string& name) {
    for (const auto& m : out)
      if (m->name() == name) return true;
    return false;
  };
  const auto add = [&](std::unique_ptr<Metric> metric) {
    std::string name = metric->name();
    for (int n = 1; taken(name); ++n) name = metric->name() + "_" + std::to_string(n);
    if (name != metric->name()) metric = std::make_unique<RenamedMetric>(std::move(metric), name);
    out.push_back(std::move(metric));
  };
  if (list.is_null()) return out;
  if (!list.is_array()) throw ConfigError(path, "expected a list of metric names");
  // A logits model's binary decision boundary is 0, not 0.5 (Keras would threshold logits at 0.5).
  const float threshold = loss.from_logits() ? 0.0f : 0.5f;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    std::string name, name_path = p;
    std::optional<ConfigObject> obj;
    if (list[i].is_string()) {
      name = list[i].get<std::string>();
    } else if (list[i].is_object()) {
      obj.emplace(list[i], p);
      name = obj->get_string("class_name");
      name_path = obj->path_of("class_name");
    } else {
      throw ConfigError(p, "expected a metric name or {\"class_name\": ...}, got " +
                               list[i].dump());
    }
    // Keras 3 logs a metric given as a plain string under that string (compile_utils'
    // get_metric), whatever the class's own default name.
    const bool named_by_string = !obj && definitions == KerasDefinitions::keras3;
    // A weighted metric named as a plain one of the output is logged as weighted_<name>.
    const auto log_name_of = [&](const std::string& default_name) {
      const std::string n = named_by_string ? name : default_name;
      if (plain)
        for (const auto& m : *plain)
          if (m->name() == n) return "weighted_" + n;
      return n;
    };
    if (is_histogram_metric(name)) {
      static const json empty = json::object();
      const json* config = obj ? obj->find("config") : nullptr;
      ConfigObject cfg(config ? *config : empty, p + ".config");
      if (obj) {
        obj->ignore({"module", "registered_name"});
        obj->finish();
      }
      add(make_histogram_metric(name, cfg, loss, output_shape, log_name_of));
      continue;
    }
    const MetricInfo* info = find_metric(name);
    backend::MetricDesc desc;
    desc.threshold = threshold;
    if (name == "accuracy" || name == "acc") {
      desc.kind = resolved_accuracy(loss, output_shape);
      for (const MetricInfo& m : metrics())
        if (m.kind == desc.kind && !m.count) info = &m;
    } else if (!info) {
      throw ConfigError(name_path, "unknown metric '" + name + "' (known: " + known_metrics() + ")");
    }
    desc.kind = info->kind;
    // Named by its class (Keras makes the object): logged under the class's default name.
    std::string log_name = name == info->class_name ? info->name : name;
    if (obj) {
      obj->ignore({"module", "registered_name"});
      static const json empty = json::object();
      const json* config = obj->find("config");
      ConfigObject cfg(config ? *config : empty, p + ".config");
      log_name = read_class_config(cfg, *info, desc);
      obj->finish();
    }
    check_target_form(*info, loss, p);
    add(std::make_unique<BuiltinMetric>(log_name_of(log_name), *info, desc));
  }
  return out;
}

}  // namespace tandem
