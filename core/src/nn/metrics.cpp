// Keras metrics: accuracy (binary / categorical / sparse categorical, chosen as Keras chooses),
// mean squared and mean absolute error.
#include <algorithm>

#include "backend/ops.hpp"
#include "util/config_object.hpp"
#include "tandem/error.hpp"
#include "nn/metric.hpp"

namespace tandem {

namespace {

using nlohmann::json;

using Kind = backend::MetricDesc::Kind;

class BuiltinMetric : public Metric {
 public:
  BuiltinMetric(std::string name, Kind kind, float threshold)
      : name_(std::move(name)), desc_{kind, threshold} {}
  std::string name() const override { return name_; }
  std::string kind() const override {
    switch (desc_.kind) {
      case Kind::binary_accuracy:
        return "binary_accuracy";
      case Kind::categorical_accuracy:
        return "categorical_accuracy";
      case Kind::sparse_categorical_accuracy:
        return "sparse_categorical_accuracy";
      case Kind::mean_squared_error:
        return "mean_squared_error";
      case Kind::mean_absolute_error:
        return "mean_absolute_error";
    }
    return "";
  }
  json config() const override {
    if (desc_.kind == Kind::binary_accuracy) return {{"threshold", desc_.threshold}};
    return json::object();
  }

  backend::MetricDesc desc() const override { return desc_; }

  MetricSum evaluate(const Tensor& pred, const Tensor& target) const override {
    const std::int64_t rows = pred.rank() > 0 ? pred.dim(0) : 1;
    const std::int64_t cols = pred.size() / std::max<std::int64_t>(rows, 1);
    backend::Backend& ops = backend::cpu_backend();
    auto sums = ops.sums();
    sums->reset(1);
    ops.metric_sum(desc_, pred, target, cols, *sums, 0);
    return {sums->read()[0], static_cast<double>(rows)};
  }

 private:
  std::string name_;
  backend::MetricDesc desc_;
};

}  // namespace

std::vector<std::unique_ptr<Metric>> make_metrics(const json& list, const std::string& path,
                                                  const Loss& loss, const Shape& output_shape) {
  std::vector<std::unique_ptr<Metric>> out;
  if (list.is_null()) return out;
  if (!list.is_array()) throw ConfigError(path, "expected a list of metric names");
  // A logits model's binary decision boundary is 0, not 0.5 (Keras would threshold logits at 0.5).
  const float threshold = loss.from_logits() ? 0.0f : 0.5f;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    if (!list[i].is_string()) throw ConfigError(p, "expected a metric name");
    const std::string name = list[i].get<std::string>();
    Kind kind;
    if (name == "accuracy" || name == "acc") {
      if (loss.name() == "binary_crossentropy" ||
          (!output_shape.empty() && output_shape.back() == 1))
        kind = Kind::binary_accuracy;
      else if (loss.name() == "sparse_categorical_crossentropy")
        kind = Kind::sparse_categorical_accuracy;
      else
        kind = Kind::categorical_accuracy;
    } else if (name == "binary_accuracy") {
      kind = Kind::binary_accuracy;
    } else if (name == "categorical_accuracy") {
      kind = Kind::categorical_accuracy;
    } else if (name == "sparse_categorical_accuracy") {
      kind = Kind::sparse_categorical_accuracy;
    } else if (name == "mse" || name == "mean_squared_error") {
      kind = Kind::mean_squared_error;
    } else if (name == "mae" || name == "mean_absolute_error") {
      kind = Kind::mean_absolute_error;
    } else {
      throw ConfigError(p, "unknown metric '" + name +
                               "' (known: accuracy, binary_accuracy, categorical_accuracy, "
                               "sparse_categorical_accuracy, mse, mae)");
    }
    for (const auto& m : out)
      if (m->name() == name) throw ConfigError(p, "metric '" + name + "' is listed twice");
    out.push_back(std::make_unique<BuiltinMetric>(name, kind, threshold));
  }
  return out;
}

}  // namespace tandem
