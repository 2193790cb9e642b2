#include "tandem/logs.hpp"

#include <cmath>
#include <cstdio>

namespace tandem {

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
