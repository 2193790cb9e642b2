// Metrics, evaluated per batch as (sum, count) pairs so that results from replicas, batches and
// ranks combine by plain addition; a metric that is no mean (AUC, MeanIoU) keeps several sums
// (its histogram's bins) and computes its value from their epoch totals. Stateless and
// thread-safe.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/loss.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

namespace backend {
struct MetricDesc;
}  // namespace backend

struct MetricSum {
  double sum = 0;
  double count = 0;
  void add(const MetricSum& o) { sum += o.sum, count += o.count; }
  double mean() const { return count > 0 ? sum / count : 0.0; }
};

class Metric {
 public:
  virtual ~Metric() = default;
  /// The key in logs: "accuracy" (what the user asked for, as Keras names it).
  virtual std::string name() const = 0;
  /// What is computed, after "accuracy" was resolved: "binary_accuracy",
  /// "categorical_accuracy", "sparse_categorical_accuracy", "mean_squared_error" or
  /// "mean_absolute_error".
  virtual std::string kind() const = 0;
  /// The metric's parameters: {"threshold": t} for binary_accuracy (0.5, or 0 when the loss
  /// reads logits), {} for the others.
  virtual nlohmann::json config() const = 0;
  /// The metric of one batch on the CPU: (sum, count), or for a histogram metric (its value, 1).
  virtual MetricSum evaluate(const Tensor& pred, const Tensor& target) const = 0;
  /// The metric as the backends compute it (backend/kernel_math.hpp): the sum of its rows.
  virtual backend::MetricDesc desc() const = 0;
  /// Whether the metric is a ratio of two sums (Precision: true over predicted positives); its
  /// count is then the sum of count_desc()'s rows, else the number of samples.
  virtual bool ratio() const { return false; }
  virtual backend::MetricDesc count_desc() const = 0;
  /// Whether the metric is a histogram (AUC's buckets, MeanIoU's confusion matrix): its sums are
  /// parts() bins that the backends' metric_histogram fills, and value() reads them.
  virtual bool histogram() const { return false; }
  /// How many (sum, count) pairs the metric keeps in StepSums: 1, or a histogram's bins (their
  /// counts unused).
  virtual std::size_t parts() const { return 1; }
  /// The metric's value from its parts summed over an epoch (or a batch): the mean, unless a
  /// histogram metric computes it otherwise.
  virtual double value(std::span<const MetricSum> parts) const { return parts[0].mean(); }
};

/// Builds the metrics of a config's "metrics" list: names, or Keras' class form
/// ({"class_name": "TopKCategoricalAccuracy", "config": {"k": 3}}). "accuracy"/"acc" resolve the
/// way Keras does, by shapes alone: binary accuracy when the output has one unit, sparse
/// categorical accuracy when the targets are class indices (the sparse loss), categorical
/// accuracy otherwise. A metric given as a plain string is logged under that string in Keras 3
/// ("AUC" as AUC); Keras 2 logged a class name under the class's default name (auc). Precision and
/// Recall count elements above 0.5 (0 when the loss reads logits) as predicted positives and
/// non-zero targets as actual ones. AUC, MeanIoU and OneHotMeanIoU are nn/histogram_metrics.hpp's.
/// Metrics made for "weighted_metrics" pass the same output's plain ones as `plain`: a name one of
/// them has is logged as "weighted_<name>" (Keras 2's rule).
std::vector<std::unique_ptr<Metric>> make_metrics(
    const nlohmann::json& list, const std::string& path, const Loss& loss,
    const Shape& output_shape, const std::vector<std::unique_ptr<Metric>>* plain = nullptr,
    KerasDefinitions definitions = KerasDefinitions::keras3);

}  // namespace tandem

TANDEM_INTERNAL_API_END
