// ConfigObject: strict, path-aware reading of a JSON object.
//
// Every value read through it is type-checked, and every failure is a ConfigError naming the full
// JSON path ("model.config.layers[1].config.units: expected a positive integer, got -3").
// `finish()` rejects keys that were never read, so typos are errors rather than silently ignored.
// Lifetime: holds a reference to the JSON it reads; the JSON must outlive it. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// The largest count or size a config may give (a dimension, units, epochs, a batch): 2^31 - 1.
/// Products of two such sizes cannot overflow 64 bits; larger products are checked where they
/// are made (shape_size).
inline constexpr std::int64_t kMaxConfigSize = 2147483647;

/// "a string", "an integer", ... for error messages.
std::string json_type_name(const nlohmann::json& value);
/// A Keras object in a config, given by name ("l2") or in class form ({"class_name": "L2",
/// "config": {...}}, with the "module" and "registered_name" keys Keras 3 writes beside).
struct KerasObject {
  std::string name;
  std::string name_path;                   // where the name stands, for "unknown ..." errors
  const nlohmann::json* config = nullptr;  // the class form's config (borrowed), if given
  std::string config_path;
};
/// Reads one; throws ConfigError at `path` for anything else ("expected <noun> or
/// {"class_name": ...}, got a number").
KerasObject read_keras_object(const nlohmann::json& spec, const std::string& path,
                              const char* noun);
/// The entry of a table of Keras objects (losses, metrics, constraints) that `name` names: its
/// `name`, its `class_name` or one of its `aliases` (members of Entry, C strings); null for
/// none. Borrowed from `table`.
template <class Entry>
const Entry* find_keras_name(const std::vector<Entry>& table, const std::string& name) {
  for (const Entry& entry : table) {
    if (name == entry.name || name == entry.class_name) return &entry;
    for (const char* alias : entry.aliases)
      if (name == alias) return &entry;
  }
  return nullptr;
}
/// The string at `key` of `object`, or "" when `object` is no object, or the key is missing or
/// not a string (for peeking at a field before a ConfigObject reads it with its checks).
std::string string_field(const nlohmann::json& object, const char* key);
/// Joins a parent path and a key: ("", "epochs") -> "epochs"; ("model", "config") ->
/// "model.config".
std::string json_path_join(const std::string& parent, const std::string& key);

class ConfigObject {
 public:
  /// Throws ConfigError if `value` is not an object.
  ConfigObject(const nlohmann::json& value, std::string path);

  const std::string& path() const { return path_; }
  std::string path_of(const std::string& key) const { return json_path_join(path_, key); }
  /// Whether `key` holds a value; a null is the key left out (and counts as read: `"y": null`
  /// where y is optional is no unknown key).
  bool has(const std::string& key) const;
  /// Whether the object holds `key` at all, null included (has() is false for null).
  bool given(const std::string& key) const;
  /// The raw value (marks the key as read). Throws ConfigError when absent.
  const nlohmann::json& at(const std::string& key);
  const nlohmann::json* find(const std::string& key);  // nullptr when absent or null

  std::string get_string(const std::string& key);
  std::string get_string(const std::string& key, const std::string& fallback);
  std::int64_t get_int(const std::string& key);
  std::int64_t get_int(const std::string& key, std::int64_t fallback);
  double get_number(const std::string& key);
  double get_number(const std::string& key, double fallback);
  bool get_bool(const std::string& key);
  bool get_bool(const std::string& key, bool fallback);
  /// A list of integers, or null (-> nullopt) where `allow_null` says so, e.g. [null, 28, 28].
  std::vector<std::optional<std::int64_t>> get_int_list(const std::string& key, bool allow_null);
  ConfigObject get_object(const std::string& key);

  /// Range checks that produce path-naming errors. positive_int is a count or a size (units,
  /// filters, heads, steps): from 1 to kMaxConfigSize.
  std::int64_t positive_int(const std::string& key);
  std::int64_t positive_int(const std::string& key, std::int64_t fallback);
  /// An integer in [lo, hi] (`fallback` when absent).
  std::int64_t int_in(const std::string& key, std::int64_t fallback, std::int64_t lo,
                      std::int64_t hi);
  double number_in(const std::string& key, double fallback, double lo, double hi,
                   bool lo_open = false, bool hi_open = false);
  std::string one_of(const std::string& key, const std::string& fallback,
                     const std::vector<std::string>& choices);
  /// one_of with the value compared in lower case, as Keras reads `padding` or a
  /// VarianceScaling `distribution`: returns the choice it matched.
  std::string one_of_any_case(const std::string& key, const std::string& fallback,
                              const std::vector<std::string>& choices);

  /// Marks keys as read without reading them (accepted for Keras compatibility, no effect).
  void ignore(std::initializer_list<const char*> keys);
  /// Throws ConfigError for the first key that was never read.
  void finish() const;

 private:
  const nlohmann::json& value_;
  std::string path_;
  mutable std::set<std::string> read_;  // has() marks a null it was asked about
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
