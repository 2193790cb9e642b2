// Logs: metric name -> value, in insertion order ("loss", "accuracy", "val_loss", ...), the way
// Keras hands `logs` to callbacks. Plain value type: copies are independent; a Logs object is used
// by one thread at a time (hooks get theirs on the training thread).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/export.hpp"

namespace tandem {

class TANDEM_EXPORT Logs {
 public:
  void set(const std::string& key, double value);
  std::optional<double> get(const std::string& key) const;
  bool contains(const std::string& key) const { return get(key).has_value(); }
  const std::vector<std::pair<std::string, double>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  /// Adds every entry of `other` with `prefix` before its key ("val_").
  void merge(const Logs& other, const std::string& prefix = "");
  nlohmann::json to_json() const;
  /// " - loss: 0.4321 - accuracy: 0.8765" (Keras progress-bar style).
  std::string to_progress_string() const;

 private:
  std::vector<std::pair<std::string, double>> items_;
};

/// Whether a larger value of the logs key `key` is better — a monitor's `mode: "auto"`: Keras
/// 3's direction of the metric the key names, told from the name as Keras names its metrics.
/// True for accuracies (a name ending in "acc" or "accuracy": "val_accuracy", "cls_acc",
/// "top_k_categorical_accuracy"), "auc", "precision", "recall", IoUs ("mean_io_u") and F-scores
/// ("f1_score", "fbeta_score"), after a "val_" prefix, an output's name and a Keras number
/// suffix ("auc_1"), in any case ("val_AUC", "Recall": Keras 3 logs a metric named by a string
/// under that string); false for everything else (losses, errors). A metric the config renamed
/// ({"name": "roc"}) is not recognised: give its callbacks a mode. Stateless; any thread.
TANDEM_EXPORT bool higher_is_better(const std::string& key);

}  // namespace tandem
