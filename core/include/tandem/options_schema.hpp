// Validation of plugin options against the plugin's JSON schema.
//
// The supported subset of JSON Schema (draft 7 keywords): "type" (a name or a list of names:
// object, array, string, integer, number, boolean, null), "enum", "minimum", "maximum",
// "exclusiveMinimum", "exclusiveMaximum", "minLength", "items", "properties", "required",
// "additionalProperties" (false or a schema), "default" and "description". Stateless; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tandem {

/// Checks `options` against `schema` and returns them with every missing property that has a
/// "default" filled in. Throws ConfigError naming the JSON path of the first problem (an unknown
/// key, a wrong type, an out-of-range value), e.g. "callbacks[0].options.patience".
nlohmann::json validate_options(const nlohmann::json& schema, const nlohmann::json& options,
                                const std::string& path);

/// Throws ConfigError when `schema` itself uses keywords or forms outside the subset above.
void check_schema(const nlohmann::json& schema, const std::string& where);

}  // namespace tandem
