// Private (CUDA module): the device descriptions (device_math.hpp) of a host Loss, Metric and
// Optimizer, read from their names and Keras configs, and the host-side checks that go with them.
//
// Host code only (it reads the objects' nlohmann::json configs, which the C++17 .cu files do not
// include); inline so that the unit tests (no CUDA) can check it against the CPU objects.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/ops/device_math.hpp"
#include "tandem/error.hpp"
#include "tandem/loss.hpp"
#include "tandem/metric.hpp"
#include "tandem/optimizer.hpp"

namespace tandem::cuda {

/// The loss the kernels compute for `loss`; throws ConfigError (at "loss") for a loss the CUDA
/// backend does not know.
inline DeviceLoss device_loss(const Loss& loss) {
  DeviceLoss d;
  const std::string name = loss.name();
  if (name == "mean_squared_error")
    d.kind = DeviceLoss::Kind::mse;
  else if (name == "mean_absolute_error")
    d.kind = DeviceLoss::Kind::mae;
  else if (name == "binary_crossentropy")
    d.kind = DeviceLoss::Kind::bce;
  else if (name == "categorical_crossentropy")
    d.kind = DeviceLoss::Kind::cce;
  else if (name == "sparse_categorical_crossentropy")
    d.kind = DeviceLoss::Kind::scce;
  else
    throw ConfigError("loss", "the CUDA backend has no kernel for loss '" + name +
                                  "' (known: mean_squared_error, mean_absolute_error, "
                                  "binary_crossentropy, categorical_crossentropy, "
                                  "sparse_categorical_crossentropy)");
  d.from_logits = loss.from_logits();
  if (d.kind == DeviceLoss::Kind::bce || d.kind == DeviceLoss::Kind::cce) {
    const nlohmann::json cfg = loss.config();
    if (cfg.is_object() && cfg.contains("config") && cfg["config"].contains("label_smoothing"))
      d.label_smoothing = cfg["config"]["label_smoothing"].get<float>();
  }
  return d;
}

/// Throws the CPU's DataError when a sparse label (host memory, one per row) is not a class
/// index in [0, classes): the device loss only marks such a row with NaN.
inline void check_sparse_labels(const float* labels, std::int64_t rows, std::int64_t classes) {
  for (std::int64_t r = 0; r < rows; ++r)
    if (dm::sparse_label(labels[r], classes) < 0)
      throw DataError("sparse_categorical_crossentropy: label " + std::to_string(labels[r]) +
                      " is not a class index in [0, " + std::to_string(classes) + ")");
}

/// The metric the kernels compute for `metric` (after "accuracy" was resolved); throws
/// ConfigError (at "metrics") for one the CUDA backend does not know.
inline DeviceMetric device_metric(const Metric& metric) {
  DeviceMetric d;
  const std::string kind = metric.kind();
  if (kind == "binary_accuracy")
    d.kind = DeviceMetric::Kind::binary_accuracy;
  else if (kind == "categorical_accuracy")
    d.kind = DeviceMetric::Kind::categorical_accuracy;
  else if (kind == "sparse_categorical_accuracy")
    d.kind = DeviceMetric::Kind::sparse_categorical_accuracy;
  else if (kind == "mean_squared_error")
    d.kind = DeviceMetric::Kind::mean_squared_error;
  else if (kind == "mean_absolute_error")
    d.kind = DeviceMetric::Kind::mean_absolute_error;
  else
    throw ConfigError("metrics", "the CUDA backend has no kernel for metric '" + metric.name() +
                                     "' (" + kind + ")");
  if (d.kind == DeviceMetric::Kind::binary_accuracy) {
    const nlohmann::json cfg = metric.config();
    if (cfg.is_object() && cfg.contains("threshold")) d.threshold = cfg["threshold"].get<float>();
  }
  return d;
}

/// The update the kernels apply for `optimizer`; throws ConfigError (at "optimizer") for one the
/// CUDA backend does not know.
inline DeviceOptimizer device_optimizer(const Optimizer& optimizer) {
  DeviceOptimizer d;
  const std::string cls = optimizer.class_name();
  if (cls == "SGD")
    d.kind = DeviceOptimizer::Kind::sgd;
  else if (cls == "Adam" || cls == "AdamW")
    d.kind = DeviceOptimizer::Kind::adam;
  else if (cls == "RMSprop")
    d.kind = DeviceOptimizer::Kind::rmsprop;
  else
    throw ConfigError("optimizer", "the CUDA backend has no update for optimizer '" + cls +
                                       "' (known: SGD, Adam, AdamW, RMSprop)");
  d.adamw = cls == "AdamW";
  const nlohmann::json c = optimizer.config();
  auto number = [&](const char* key, double fallback) {
    const auto it = c.find(key);
    return it == c.end() || it->is_null() ? fallback : it->get<double>();
  };
  auto flag = [&](const char* key) {
    const auto it = c.find(key);
    return it != c.end() && it->is_boolean() && it->get<bool>();
  };
  d.weight_decay = number("weight_decay", 0.0);
  d.clipnorm = number("clipnorm", 0.0);
  d.clipvalue = number("clipvalue", 0.0);
  d.global_clipnorm = number("global_clipnorm", 0.0);
  switch (d.kind) {
    case DeviceOptimizer::Kind::sgd:
      d.momentum = number("momentum", 0.0);
      d.nesterov = flag("nesterov");
      break;
    case DeviceOptimizer::Kind::adam:
      d.beta_1 = number("beta_1", 0.9);
      d.beta_2 = number("beta_2", 0.999);
      d.epsilon = number("epsilon", 1e-7);
      d.amsgrad = flag("amsgrad");
      break;
    case DeviceOptimizer::Kind::rmsprop:
      d.rho = number("rho", 0.9);
      d.momentum = number("momentum", 0.0);
      d.epsilon = number("epsilon", 1e-7);
      d.centered = flag("centered");
      break;
  }
  return d;
}

/// The optimizer's state slots per parameter, as the host Optimizer's slot_names().
inline std::vector<std::string> optimizer_slot_names(const DeviceOptimizer& o) {
  switch (o.kind) {
    case DeviceOptimizer::Kind::sgd:
      return o.momentum > 0 ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
    case DeviceOptimizer::Kind::adam:
      return o.amsgrad ? std::vector<std::string>{"m", "v", "vhat"}
                       : std::vector<std::string>{"m", "v"};
    case DeviceOptimizer::Kind::rmsprop: {
      std::vector<std::string> s{"velocity"};
      if (o.momentum > 0) s.emplace_back("momentum");
      if (o.centered) s.emplace_back("average_gradient");
      return s;
    }
  }
  return {};
}

}  // namespace tandem::cuda
