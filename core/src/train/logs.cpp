#include "tandem/logs.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace tandem {

bool higher_is_better(const std::string& key) {
  // Case aside: Keras 3 logs a metric named by the string "AUC" or "Recall" under that string.
  std::string name = key;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Keras numbers a second metric of one name: "auc_1".
  const std::size_t last = name.find_last_not_of("0123456789");
  if (last != std::string::npos && last + 1 < name.size() && name[last] == '_') name.resize(last);
  const auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (const char* suffix :
       {"acc", "accuracy", "auc", "precision", "recall", "io_u", "iou", "f1_score", "fbeta_score"})
    if (ends_with(suffix)) return true;
  return false;
}

void Logs::set(const std::string& key, double value) {
  for (auto& [k, v] : items_) {
    if (k == key) {
      v = value;
      return;
    }
  }
  items_.emplace_back(key, value);
}

std::optional<double> Logs::get(const std::string& key) const {
  for (const auto& [k, v] : items_)
    if (k == key) return v;
  return std::nullopt;
}

void Logs::merge(const Logs& other, const std::string& prefix) {
  for (const auto& [k, v] : other.items_) set(prefix + k, v);
}

nlohmann::json Logs::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : items_) {
    if (std::isfinite(v))
      j[k] = v;
    else
      j[k] = nullptr;  // JSON has no NaN; null marks a non-finite value
  }
  return j;
}

std::string Logs::to_progress_string() const {
  std::string out;
  char buffer[64];
  for (const auto& [k, v] : items_) {
    std::snprintf(buffer, sizeof buffer, "%.4f", v);
    out += " - " + k + ": " + buffer;
  }
  return out;
}

}  // namespace tandem
