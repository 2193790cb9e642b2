// Private to the built-in plugins: an option Keras renamed, read under either name.
//
// Keras 2 configs carry the old names (ModelCheckpoint's `period`, ReduceLROnPlateau's
// `epsilon`); a plugin declares the old name in its schema with a null default and reads both
// through read_renamed_option. Header-only: each plugin is its own shared object.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/error.hpp"

namespace tandem::plugins {

/// The value of option `new_name` (`value`, as read), or of `old_name` when the config gave that
/// one (not null), saying so on stderr as `plugin`'s warning. Throws ConfigError at `at` +
/// `old_name` when both were given (`value` is not `default_value`). `keras` names the version
/// that used the old name ("Keras 2").
template <class T>
T read_renamed_option(const nlohmann::json& options, const std::string& at, const char* plugin,
                      const char* old_name, const char* new_name, const char* keras, T value,
                      T default_value) {
  if (options.at(old_name).is_null()) return value;
  if (value != default_value)
    throw ConfigError(at + old_name, std::string("gives ") + new_name + " a second time (" +
                                         old_name + " is " + keras + "'s name for it)");
  std::fprintf(stderr, "%s: warning: %s%s: %s's name; read as %s, its name in Keras 3\n", plugin,
               at.c_str(), old_name, keras, new_name);
  return options.at(old_name).get<T>();
}

}  // namespace tandem::plugins
