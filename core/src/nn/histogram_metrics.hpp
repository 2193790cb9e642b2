// AUC, MeanIoU and OneHotMeanIoU: the Keras metrics that are no mean of per-sample values. Each
// keeps a histogram — AUC the weight of positive and of negative labels in each of its
// num_thresholds buckets of the prediction, MeanIoU the confusion matrix — that the backends
// fill (Backend::metric_histogram) and that adds up across rows, replicas, batches and ranks;
// the value is computed from the epoch's histogram as Keras computes it from its variables
// (keras.src.metrics.confusion_metrics.AUC.result, iou_metrics.IoU.result). Stateless and
// thread-safe, like every Metric.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "nn/loss.hpp"
#include "nn/metric.hpp"
#include "util/config_object.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// Whether `name` (a metrics-list string or class_name) is AUC, MeanIoU or OneHotMeanIoU.
bool is_histogram_metric(const std::string& name);

/// The histogram metric `name` with the class form's `config` (an empty object for a plain
/// name), for an output of `output_shape` trained with `loss` (which says whether targets are
/// class indices). `log_name` maps the metric's name (Keras' default, or the config's `name`) to
/// its key in logs. Throws ConfigError at the config's keys, also for a setting Tandem does not
/// compute (multi_label AUC, explicit thresholds) and for targets or outputs the metric cannot
/// read as configured (a MeanIoU told its targets are class indices when they are one-hot).
std::unique_ptr<Metric> make_histogram_metric(
    const std::string& name, ConfigObject& config, const Loss& loss, const Shape& output_shape,
    const std::function<std::string(const std::string&)>& log_name);

}  // namespace tandem

TANDEM_INTERNAL_API_END
