// Keras metrics: accuracy (binary / categorical / sparse categorical, chosen as Keras chooses),
// mean squared and mean absolute error.
#include <cmath>

#include "tandem/config_object.hpp"
#include "tandem/error.hpp"
#include "tandem/metric.hpp"

namespace tandem {

namespace {

using nlohmann::json;

std::int64_t argmax(const float* p, std::int64_t n) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < n; ++i)
    if (p[i] > p[best]) best = i;
  return best;
}

enum class Kind { binary, categorical, sparse, mse, mae };

class BuiltinMetric : public Metric {
 public:
  BuiltinMetric(std::string name, Kind kind, float threshold)
      : name_(std::move(name)), kind_(kind), threshold_(threshold) {}
  std::string name() const override { return name_; }
  std::string kind() const override {
    switch (kind_) {
      case Kind::binary:
        return "binary_accuracy";
      case Kind::categorical:
        return "categorical_accuracy";
      case Kind::sparse:
        return "sparse_categorical_accuracy";
      case Kind::mse:
        return "mean_squared_error";
      case Kind::mae:
        return "mean_absolute_error";
    }
    return "";
  }
  json config() const override {
    if (kind_ == Kind::binary) return {{"threshold", threshold_}};
    return json::object();
  }

  MetricSum evaluate(const Tensor& pred, const Tensor& target) const override {
    const std::int64_t rows = pred.rank() > 0 ? pred.dim(0) : 1;
    const std::int64_t cols = pred.size() / std::max<std::int64_t>(rows, 1);
    const float* p = pred.data();
    const float* t = target.data();
    MetricSum out;
    out.count = static_cast<double>(rows);
    switch (kind_) {
      case Kind::sparse:
        for (std::int64_t r = 0; r < rows; ++r)
          out.sum += argmax(p + r * cols, cols) == static_cast<std::int64_t>(t[r]) ? 1.0 : 0.0;
        break;
      case Kind::categorical:
        for (std::int64_t r = 0; r < rows; ++r)
          out.sum += argmax(p + r * cols, cols) == argmax(t + r * cols, cols) ? 1.0 : 0.0;
        break;
      case Kind::binary:
      case Kind::mse:
      case Kind::mae:
        for (std::int64_t r = 0; r < rows; ++r) {
          double s = 0;
          for (std::int64_t c = r * cols; c < (r + 1) * cols; ++c) {
            if (kind_ == Kind::binary)
              s += ((p[c] > threshold_ ? 1.0f : 0.0f) == t[c]) ? 1.0 : 0.0;
            else if (kind_ == Kind::mse)
              s += (p[c] - t[c]) * (p[c] - t[c]);
            else
              s += std::fabs(p[c] - t[c]);
          }
          out.sum += s / static_cast<double>(cols);
        }
        break;
    }
    return out;
  }

 private:
  std::string name_;
  Kind kind_;
  float threshold_;
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
        kind = Kind::binary;
      else if (loss.name() == "sparse_categorical_crossentropy")
        kind = Kind::sparse;
      else
        kind = Kind::categorical;
    } else if (name == "binary_accuracy") {
      kind = Kind::binary;
    } else if (name == "categorical_accuracy") {
      kind = Kind::categorical;
    } else if (name == "sparse_categorical_accuracy") {
      kind = Kind::sparse;
    } else if (name == "mse" || name == "mean_squared_error") {
      kind = Kind::mse;
    } else if (name == "mae" || name == "mean_absolute_error") {
      kind = Kind::mae;
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
