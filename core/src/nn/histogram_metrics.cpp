#include "nn/histogram_metrics.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <vector>

#include "backend/ops.hpp"
#include "tandem/error.hpp"

namespace tandem {

namespace {

using nlohmann::json;
using Kind = backend::MetricDesc::Kind;

// Keras' divide_no_nan: 0 where the denominator is 0.
double divide_no_nan(double a, double b) {
  return b == 0 ? 0.0 : a / b;
}

// What every histogram metric shares: its bins are its parts; evaluate() is one batch's value.
class HistogramMetric : public Metric {
 public:
  HistogramMetric(std::string name, std::string kind, backend::MetricDesc desc, json config)
      : name_(std::move(name)), kind_(std::move(kind)), desc_(desc), config_(std::move(config)) {}
  std::string name() const override { return name_; }
  std::string kind() const override { return kind_; }
  json config() const override { return config_; }
  backend::MetricDesc desc() const override { return desc_; }
  backend::MetricDesc count_desc() const override { return desc_; }
  bool histogram() const override { return true; }
  std::size_t parts() const override {
    return static_cast<std::size_t>(backend::math::histogram_bins(desc_));
  }

  MetricSum evaluate(const Tensor& pred, const Tensor& target) const override {
    const std::int64_t rows = pred.rank() > 0 ? pred.dim(0) : 1;
    const std::int64_t cols = pred.size() / std::max<std::int64_t>(rows, 1);
    backend::Backend& ops = backend::cpu_backend();
    auto sums = ops.sums();
    sums->reset(parts());
    ops.metric_histogram(desc_, pred, target, {}, cols, *sums, 0);
    std::vector<MetricSum> bins;
    for (double v : sums->read()) bins.push_back({v, 0});
    return {value(bins), 1};
  }

 protected:
  std::string name_, kind_;
  backend::MetricDesc desc_;
  json config_;
};

enum class Curve { roc, pr };
enum class Summation { interpolation, minoring, majoring };

class Auc final : public HistogramMetric {
 public:
  Auc(std::string name, backend::MetricDesc desc, Curve curve, Summation summation, json config)
      : HistogramMetric(std::move(name), "auc", desc, std::move(config)),
        curve_(curve),
        summation_(summation) {}

  double value(std::span<const MetricSum> parts) const override {
    const auto n = static_cast<std::size_t>(desc_.bins);
    // Threshold i counts the predictions above it: the buckets from i up.
    std::vector<double> tp(n), fp(n), fn(n), tn(n);
    double positives = 0, negatives = 0;
    for (std::size_t i = n; i-- > 0;) {
      positives += parts[i].sum;
      negatives += parts[n + i].sum;
      tp[i] = positives;
      fp[i] = negatives;
    }
    for (std::size_t i = 0; i < n; ++i) {
      fn[i] = positives - tp[i];
      tn[i] = negatives - fp[i];
    }
    if (curve_ == Curve::pr && summation_ == Summation::interpolation)
      return interpolated_pr_auc(tp, fp, fn);
    std::vector<double> x(n), y(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double recall = divide_no_nan(tp[i], tp[i] + fn[i]);
      x[i] = curve_ == Curve::roc ? divide_no_nan(fp[i], fp[i] + tn[i]) : recall;
      y[i] = curve_ == Curve::roc ? recall : divide_no_nan(tp[i], tp[i] + fp[i]);
    }
    double area = 0;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      const double height = summation_ == Summation::interpolation ? (y[i] + y[i + 1]) / 2
                            : summation_ == Summation::minoring    ? std::min(y[i], y[i + 1])
                                                                   : std::max(y[i], y[i + 1]);
      area += (x[i] - x[i + 1]) * height;
    }
    return area;
  }

 private:
  // Davis & Goadrich's interpolation of the precision-recall curve (Keras' interpolate_pr_auc).
  static double interpolated_pr_auc(const std::vector<double>& tp, const std::vector<double>& fp,
                                    const std::vector<double>& fn) {
    double area = 0;
    for (std::size_t i = 0; i + 1 < tp.size(); ++i) {
      const double dtp = tp[i] - tp[i + 1];
      const double p0 = tp[i] + fp[i], p1 = tp[i + 1] + fp[i + 1];
      const double slope = divide_no_nan(dtp, std::max(p0 - p1, 0.0));
      const double intercept = tp[i + 1] - slope * p1;
      const double ratio = p0 > 0 && p1 > 0 ? divide_no_nan(p0, std::max(p1, 0.0)) : 1.0;
      area += divide_no_nan(slope * (dtp + intercept * std::log(ratio)),
                            std::max(tp[i + 1] + fn[i + 1], 0.0));
    }
    return area;
  }

  Curve curve_;
  Summation summation_;
};

class MeanIou final : public HistogramMetric {
 public:
  using HistogramMetric::HistogramMetric;

  // The mean over classes that occur (as a target or a prediction) of tp / (tp + fp + fn).
  double value(std::span<const MetricSum> parts) const override {
    const auto n = static_cast<std::size_t>(desc_.bins);
    double total = 0;
    int present = 0;
    for (std::size_t c = 0; c < n; ++c) {
      double as_target = 0, as_prediction = 0;
      for (std::size_t k = 0; k < n; ++k) {
        as_target += parts[c * n + k].sum;
        as_prediction += parts[k * n + c].sum;
      }
      const double hits = parts[c * n + c].sum;
      const double union_ = as_target + as_prediction - hits;
      if (union_ == 0) continue;
      total += hits / union_;
      ++present;
    }
    return divide_no_nan(total, present);
  }
};

struct Setting {
  const char* name;        // Keras' default metric name
  const char* class_name;  // Keras' class
};
const Setting kAuc{"auc", "AUC"};
const Setting kMeanIou{"mean_io_u", "MeanIoU"};
const Setting kOneHotMeanIou{"one_hot_mean_io_u", "OneHotMeanIoU"};

bool is(const Setting& s, const std::string& name) {
  return name == s.name || name == s.class_name;
}

// Keys that must keep Keras' default because Tandem computes only that case.
void require_default(ConfigObject& cfg, const char* key, const json& keras_default,
                     const std::string& why) {
  const json* v = cfg.find(key);  // null reads as absent
  if (v && *v != keras_default)
    throw ConfigError(cfg.path_of(key),
                      "must be " + keras_default.dump() + " (" + why + "), got " + v->dump());
}

std::unique_ptr<Metric> make_auc(ConfigObject& cfg, const Loss& loss,
                                 const std::function<std::string(const std::string&)>& log_name) {
  if (loss.desc().kind == backend::LossDesc::Kind::scce)
    throw ConfigError(cfg.path(),
                      "AUC compares every output value with its own 0/1 label, but "
                      "the loss " +
                          loss.name() +
                          " gives one class index per sample "
                          "(one-hot targets and categorical_crossentropy do it)");
  backend::MetricDesc desc;
  desc.kind = Kind::auc_buckets;
  const std::int64_t thresholds = cfg.get_int("num_thresholds", 200);
  if (thresholds < 2 || thresholds > 100000)
    throw ConfigError(cfg.path_of("num_thresholds"),
                      "expected 2 to 100000 thresholds, got " + std::to_string(thresholds));
  desc.bins = static_cast<int>(thresholds);
  desc.from_logits = cfg.get_bool("from_logits", false);
  // Keras' from_str takes both spellings of each (AUCCurve, AUCSummationMethod).
  const std::string curve_name = cfg.one_of("curve", "ROC", {"ROC", "PR", "roc", "pr"});
  const Curve curve = curve_name == "PR" || curve_name == "pr" ? Curve::pr : Curve::roc;
  std::string summation = cfg.one_of(
      "summation_method", "interpolation",
      {"interpolation", "minoring", "majoring", "Interpolation", "Minoring", "Majoring"});
  summation[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(summation[0])));
  require_default(cfg, "multi_label", false,
                  "one curve over every output value; a curve per label is not computed");
  for (const char* key : {"num_labels", "label_weights", "thresholds"})
    require_default(cfg, key, nullptr,
                    std::string(key) == "thresholds"
                        ? "thresholds are num_thresholds evenly spread ones"
                        : "for multi_label, which is not computed");
  const std::string name = log_name(cfg.get_string("name", kAuc.name));
  cfg.ignore({"dtype"});
  cfg.finish();
  json config = {{"num_thresholds", thresholds},
                 {"curve", curve == Curve::pr ? "PR" : "ROC"},
                 {"summation_method", summation},
                 {"from_logits", desc.from_logits}};
  return std::make_unique<Auc>(name, desc, curve,
                               summation == "minoring"   ? Summation::minoring
                               : summation == "majoring" ? Summation::majoring
                                                         : Summation::interpolation,
                               std::move(config));
}

// MeanIoU reads classes from the targets and outputs as configured, at each position (every
// value of an output but its last axis'); each reading must fit what they are for this loss
// and output, whose last axis has `width` values.
void check_iou_readings(ConfigObject& cfg, const backend::MetricDesc& desc, const Loss& loss,
                        std::int64_t width, bool one_hot_class) {
  const bool labels = loss.desc().kind == backend::LossDesc::Kind::scce || width == 1;
  const std::string classes = std::to_string(desc.bins);
  if (desc.sparse_true && !labels)
    throw ConfigError(cfg.path_of("sparse_y_true"),
                      "the targets are " + std::to_string(width) +
                          " values on the last axis (one-hot, for the loss " + loss.name() +
                          "), not class indices: set it false (or use OneHotMeanIoU) to take "
                          "their argmax");
  if (!desc.sparse_true && labels)
    throw ConfigError(
        one_hot_class ? cfg.path() : cfg.path_of("sparse_y_true"),
        "the targets are class indices (for the loss " + loss.name() +
            "), not one-hot: " + (one_hot_class ? "use MeanIoU" : "set sparse_y_true true"));
  if (desc.sparse_pred && width != 1)
    throw ConfigError(cfg.path_of("sparse_y_pred"),
                      "the output has " + std::to_string(width) +
                          " values on its last axis, not a class index: set sparse_y_pred false "
                          "to take their argmax");
  if (!desc.sparse_pred && width != desc.bins)
    throw ConfigError(cfg.path_of("num_classes"),
                      classes + " classes, but the output has " + std::to_string(width) +
                          " values on its last axis to take the argmax of");
}

std::unique_ptr<Metric> make_mean_iou(
    const Setting& setting, ConfigObject& cfg, const Loss& loss, const Shape& output_shape,
    const std::function<std::string(const std::string&)>& log_name) {
  const bool one_hot = &setting == &kOneHotMeanIou;
  if (!cfg.has("num_classes"))
    throw ConfigError(cfg.path_of("num_classes"), std::string(setting.class_name) +
                                                      " needs num_classes (give the class "
                                                      "form: {\"class_name\": \"" +
                                                      setting.class_name +
                                                      "\", \"config\": {\"num_classes\": N}})");
  backend::MetricDesc desc;
  desc.kind = Kind::confusion_matrix;
  const std::int64_t classes = cfg.get_int("num_classes");
  if (classes < 2 || classes > 4096)
    throw ConfigError(cfg.path_of("num_classes"),
                      "expected 2 to 4096 classes, got " + std::to_string(classes));
  desc.bins = static_cast<int>(classes);
  if (const json* ignored = cfg.find("ignore_class"); ignored && !ignored->is_null()) {
    // A class index; a whole float (1.0, as Python may write it) is that index. A class
    // outside [0, num_classes) (Keras' -1 or 255 for unlabelled pixels) counts nowhere anyway.
    const double v = ignored->is_number() ? ignored->get<double>() : 0.5;
    if (std::floor(v) != v || std::fabs(v) > 1e9)
      throw ConfigError(cfg.path_of("ignore_class"),
                        "expected a class index or null, got " + ignored->dump());
    desc.ignore_class = static_cast<int>(v);
  }
  desc.sparse_true = one_hot ? false : cfg.get_bool("sparse_y_true", true);
  desc.sparse_pred = cfg.get_bool("sparse_y_pred", !one_hot);
  require_default(cfg, "axis", -1, "the class axis is the output's last");
  check_iou_readings(cfg, desc, loss, output_shape.empty() ? 1 : output_shape.back(), one_hot);
  const std::string name = log_name(cfg.get_string("name", setting.name));
  cfg.ignore({"dtype"});
  cfg.finish();
  json config = {{"num_classes", classes},
                 {"ignore_class", desc.ignore_class >= 0 ? json(desc.ignore_class) : json()},
                 {"sparse_y_true", desc.sparse_true},
                 {"sparse_y_pred", desc.sparse_pred}};
  return std::make_unique<MeanIou>(name, setting.name, desc, std::move(config));
}

}  // namespace

bool is_histogram_metric(const std::string& name) {
  return is(kAuc, name) || is(kMeanIou, name) || is(kOneHotMeanIou, name);
}

std::unique_ptr<Metric> make_histogram_metric(
    const std::string& name, ConfigObject& config, const Loss& loss, const Shape& output_shape,
    const std::function<std::string(const std::string&)>& log_name) {
  if (is(kAuc, name)) return make_auc(config, loss, log_name);
  if (is(kMeanIou, name)) return make_mean_iou(kMeanIou, config, loss, output_shape, log_name);
  if (is(kOneHotMeanIou, name))
    return make_mean_iou(kOneHotMeanIou, config, loss, output_shape, log_name);
  return nullptr;
}

}  // namespace tandem
