// Validation of plugin options against the plugin's JSON schema.
//
// The supported subset of JSON Schema (draft 7 keywords): "type" (a name or a list of names:
// object, array, string, integer, number, boolean, null), "enum", "minimum", "maximum",
// "exclusiveMinimum", "exclusiveMaximum", "minLength", "items", "properties", "required",
// "additionalProperties" (false or a schema), "default" and "description". Stateless; thread-safe.
//
// This is Tandem's one validator of JSON Schema: the engine checks run configs with it, and
// tandem-gui's option forms ask it through `tandem check-options --json` (core/app), so both say
// the same thing in the same words: "expected an integer >= 0, got \"abc\"".
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// Checks `options` against `schema` and returns them with every missing property that has a
/// "default" filled in. Throws ConfigError naming the JSON path of the first problem (an unknown
/// key, a wrong type, an out-of-range value), e.g. "config error at 'callbacks[0].options.patience':
/// expected an integer >= 0, got -1".
nlohmann::json validate_options(const nlohmann::json& schema, const nlohmann::json& options,
                                const std::string& path);

/// One problem of one option (a top-level property of the options object).
struct OptionProblem {
  std::string option;   // the property, or "" for a problem of the options as a whole
  std::string path;     // where, below the options: "patience", "sizes[1]", "limits.low"
  std::string message;  // what, without the path: "expected an integer >= 0, got -1"
};

/// Every problem of `options` against `schema` (of a checked schema), at most one per option (its
/// first, as validate_options() would report it), options in key order, then the required ones
/// that are missing. Empty when validate_options() would accept them.
std::vector<OptionProblem> option_problems(const nlohmann::json& schema,
                                           const nlohmann::json& options);

/// What `schema` accepts, in words: "an integer >= 0", "a string or an integer >= 1",
/// "one of auto, min, max", "a number > 0 or null", "a JSON value". The messages above use it.
std::string describe_schema(const nlohmann::json& schema);

/// Throws ConfigError when `schema` itself uses keywords or forms outside the subset above.
void check_schema(const nlohmann::json& schema, const std::string& where);
/// check_schema() for a plugin's options schema as a whole: it must also accept an object
/// (a callback entry's "options" are one), so a "type" that does not name "object" is refused.
void check_options_schema(const nlohmann::json& schema, const std::string& where);

}  // namespace tandem

TANDEM_INTERNAL_API_END
