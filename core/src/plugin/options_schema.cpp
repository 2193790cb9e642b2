#include "plugin/options_schema.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "util/config_object.hpp"
#include "tandem/error.hpp"

namespace tandem {

using nlohmann::json;

namespace {

bool has_type(const json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "integer")  // a whole number a plugin can read as std::int64_t
    return value.is_number_integer()
               ? !value.is_number_unsigned() ||
                     value.get<std::uint64_t>() <=
                         static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
               : (value.is_number_float() &&
                  std::floor(value.get<double>()) == value.get<double>() &&
                  std::abs(value.get<double>()) < 0x1p63);
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return false;
}

// ---- what a schema accepts, in words (the messages of every violation) ----

std::string json_text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A number without a needless fraction: 5 (also for 5.0), 0.25, 1e+20.
std::string number_text(const json& value) {
  if (value.is_number_float()) {
    const double v = value.get<double>();
    if (std::isfinite(v) && std::floor(v) == v && std::abs(v) < 1e15)
      return std::to_string(static_cast<long long>(v));
  }
  return json_text(value);
}

// How an enum item or a default is shown: strings bare ("" when empty), anything else as JSON.
std::string display_text(const json& value) {
  if (value.is_string())
    return value.get<std::string>().empty() ? "\"\"" : value.get<std::string>();
  return value.is_number() ? number_text(value) : json_text(value);
}

std::vector<std::string> type_names(const json& schema) {
  if (!schema.contains("type")) return {};
  const json& type = schema["type"];
  if (type.is_string()) return {type.get<std::string>()};
  std::vector<std::string> names;
  for (const auto& t : type) names.push_back(t.get<std::string>());
  return names;
}

std::string join_words(const std::vector<std::string>& words) {  // "a, b or c"
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i)
    out += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  return out;
}

}  // namespace

std::string describe_schema(const json& schema) {
  if (schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty()) {
    std::string items;
    for (const auto& e : schema["enum"]) items += (items.empty() ? "" : ", ") + display_text(e);
    return "one of " + items;
  }
  const std::vector<std::string> types = type_names(schema);
  if (types.empty()) return "a JSON value";
  std::string bounds;
  for (const auto& [key, relation] :
       {std::pair{"minimum", ">="}, std::pair{"exclusiveMinimum", ">"}, std::pair{"maximum", "<="},
        std::pair{"exclusiveMaximum", "<"}})
    if (schema.contains(key) && schema[key].is_number())
      bounds +=
          (bounds.empty() ? " " : " and ") + std::string(relation) + " " + number_text(schema[key]);
  std::vector<std::string> nouns;
  for (const auto& type : types) {
    if (type == "integer") {
      nouns.push_back("an integer" + bounds);
    } else if (type == "number") {
      nouns.push_back("a number" + bounds);
    } else if (type == "string") {
      const std::int64_t min_length =
          schema.contains("minLength") && schema["minLength"].is_number_integer()
              ? schema["minLength"].get<std::int64_t>()
              : 0;
      nouns.push_back(min_length <= 0 ? "a string"
                      : min_length == 1
                          ? "a non-empty string"
                          : "a string of at least " + std::to_string(min_length) + " characters");
    } else if (type == "boolean") {
      nouns.push_back("true or false");
    } else if (type == "null") {
      nouns.push_back("null");
    } else if (type == "array") {
      nouns.push_back("a JSON list");
    } else if (type == "object") {
      nouns.push_back("a JSON object");
    } else {
      nouns.push_back(type);
    }
  }
  return join_words(nouns);
}

namespace {

// A value that does not fit its schema: where (the JSON path) and what is wrong.
struct Violation {
  std::string path;
  std::string what;
};

// How many values one check may visit, defaults filled in included: defaults holding arrays of
// objects with defaults grow tenfold a level (a 1 KB schema asked for 30 GB).
constexpr std::size_t kMaxCheckedValues = 1'000'000;

// Where a value sits: a chain up to the checked value along validate()'s calls, each link on its
// caller's stack. Spelled out as a JSON path only when a Violation is thrown (a check may visit a
// million values; their paths would be a million strings).
struct Place {
  const Place* parent;     // null at the checked value
  const std::string* key;  // the checked value's own path at the top; below, a member's name,
  std::size_t index;       // or null for the list item at `index`
};

std::string path_of(const Place& place) {
  if (place.parent == nullptr) return *place.key;
  const std::string parent = path_of(*place.parent);
  return place.key != nullptr ? json_path_join(parent, *place.key)
                              : parent + "[" + std::to_string(place.index) + "]";
}

// Whether the schema's `type` names `type` (alone or in its list); false without a `type`.
bool allows_type(const json& schema, const char* type) {
  if (!schema.contains("type")) return false;
  const json& t = schema["type"];
  return t.is_string() ? t == type : std::find(t.begin(), t.end(), json(type)) != t.end();
}

bool fits_type(const json& schema, const json& value) {
  if (!schema.contains("type")) return true;
  const json& t = schema["type"];
  if (t.is_string()) return has_type(value, t.get_ref<const std::string&>());
  return std::any_of(t.begin(), t.end(),
                     [&](const json& name) { return has_type(value, name.get<std::string>()); });
}

bool within_bounds(const json& schema, double v) {
  const auto violates = [&](const char* key, auto&& ok) {
    return schema.contains(key) && !ok(v, schema[key].get<double>());
  };
  return !(violates("minimum", [](double x, double b) { return x >= b; }) ||
           violates("maximum", [](double x, double b) { return x <= b; }) ||
           violates("exclusiveMinimum", [](double x, double b) { return x > b; }) ||
           violates("exclusiveMaximum", [](double x, double b) { return x < b; }));
}

// minLength counts characters (UTF-8 code points), as JSON Schema does.
bool long_enough(const json& schema, const std::string& text) {
  const auto characters = std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  });
  return characters >= schema["minLength"].get<std::int64_t>();
}

// Checks `value` against `schema` (keywords in this order: type, enum, bounds, minLength, items,
// properties). When `filled` is not null, stores there the value with the defaults of missing
// properties filled in (the check alone builds nothing). `budget`: values it may still visit.
// Throws Violation.
void validate(const json& schema, const json& value, const Place& place, std::size_t& budget,
              json* filled) {
  if (budget == 0)
    throw Violation{path_of(place),
                    "the options and the defaults filled into them hold more than " +
                        std::to_string(kMaxCheckedValues) + " values"};
  --budget;
  const auto fail = [&] {
    throw Violation{path_of(place),
                    "expected " + describe_schema(schema) + ", got " + json_text(value)};
  };
  if (!fits_type(schema, value)) fail();
  if (schema.contains("enum") && std::none_of(schema["enum"].begin(), schema["enum"].end(),
                                              [&](const json& e) { return e == value; }))
    fail();
  if (value.is_number() && !within_bounds(schema, value.get<double>())) fail();
  if (value.is_string() && schema.contains("minLength") &&
      !long_enough(schema, value.get_ref<const std::string&>()))
    fail();
  // 2.0 is an integer in JSON Schema: handed on as one, so that get<std::int64_t>() reads it.
  if (value.is_number_float() && allows_type(schema, "integer") && !allows_type(schema, "number")) {
    if (filled != nullptr) *filled = static_cast<std::int64_t>(value.get<double>());
    return;
  }
  if (value.is_array() && schema.contains("items")) {
    if (filled != nullptr) *filled = json::array();
    for (std::size_t i = 0; i < value.size(); ++i) {
      json* item = filled != nullptr ? &filled->emplace_back() : nullptr;
      validate(schema["items"], value[i], Place{&place, nullptr, i}, budget, item);
    }
    return;
  }
  if (value.is_object() &&
      (schema.contains("properties") || schema.contains("additionalProperties"))) {
    if (filled != nullptr) *filled = value;
    static const json no_properties = json::object();
    const json& props = schema.contains("properties") ? schema["properties"] : no_properties;
    for (auto it = value.begin(); it != value.end(); ++it) {
      const Place child{&place, &it.key(), 0};
      json* member = filled != nullptr ? &(*filled)[it.key()] : nullptr;
      if (props.contains(it.key())) {
        validate(props[it.key()], it.value(), child, budget, member);
      } else if (schema.contains("additionalProperties")) {
        const json& extra = schema["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>()) {
          std::string known;
          for (auto p = props.begin(); p != props.end(); ++p)
            known += (known.empty() ? "" : ", ") + p.key();
          throw Violation{path_of(child), "unknown option (known: " + known + ")"};
        }
        if (extra.is_object()) validate(extra, it.value(), child, budget, member);
      }
    }
    for (const auto& r : schema.value("required", json::array()))
      if (!value.contains(r.get<std::string>()))
        throw Violation{json_path_join(path_of(place), r.get<std::string>()),
                        "required option is missing"};
    // A missing option takes its default, with the defaults inside it filled in too.
    for (auto p = props.begin(); p != props.end(); ++p)
      if (!value.contains(p.key()) && p.value().contains("default")) {
        json* member = filled != nullptr ? &(*filled)[p.key()] : nullptr;
        validate(p.value(), p.value()["default"], Place{&place, &p.key(), 0}, budget, member);
      }
    return;
  }
  if (filled != nullptr) *filled = value;
}

// Checks `value` (at `path`) against `schema`; returns it with the defaults filled in.
json validated(const json& schema, const json& value, const std::string& path) {
  std::size_t budget = kMaxCheckedValues;
  json filled;
  validate(schema, value, Place{nullptr, &path, 0}, budget, &filled);
  return filled;
}

// Checks `value` (at `path`) against `schema` and builds nothing. Throws Violation.
void check(const json& schema, const json& value, const std::string& path) {
  std::size_t budget = kMaxCheckedValues;
  validate(schema, value, Place{nullptr, &path, 0}, budget, nullptr);
}

const std::set<std::string>& known_keywords() {
  static const std::set<std::string> k = {
      "type",        "enum",  "minimum",    "maximum",  "exclusiveMinimum",     "exclusiveMaximum",
      "minLength",   "items", "properties", "required", "additionalProperties", "default",
      "description", "title", "$schema",    "examples"};
  return k;
}

}  // namespace

json validate_options(const json& schema, const json& options, const std::string& path) {
  try {
    return validated(schema, options.is_null() ? json::object() : options, path);
  } catch (const Violation& v) {
    throw ConfigError(v.path, v.what);
  }
}

std::vector<OptionProblem> option_problems(const json& schema, const json& options) {
  const json value = options.is_null() ? json::object() : options;
  std::vector<OptionProblem> problems;
  if (!value.is_object() ||
      !(schema.contains("properties") || schema.contains("additionalProperties"))) {
    try {
      check(schema, value, "");
    } catch (const Violation& v) {
      problems.push_back({"", v.path, v.what});
    }
    return problems;
  }
  // The object's own keywords (type, enum) first; then each option on its own, so that every
  // option gets its first problem.
  json shell = schema;
  shell.erase("properties");
  shell.erase("additionalProperties");
  shell.erase("required");
  try {
    check(shell, value, "");
  } catch (const Violation& v) {
    problems.push_back({"", v.path, v.what});
    return problems;
  }
  const json props = schema.value("properties", json::object());
  for (auto it = value.begin(); it != value.end(); ++it) {
    json one = {{"properties", props}};
    if (schema.contains("additionalProperties"))
      one["additionalProperties"] = schema["additionalProperties"];
    try {
      check(one, json{{it.key(), it.value()}}, "");
    } catch (const Violation& v) {
      problems.push_back({it.key(), v.path, v.what});
    }
  }
  for (const auto& r : schema.value("required", json::array()))
    if (!value.contains(r.get<std::string>()))
      problems.push_back(
          {r.get<std::string>(), r.get<std::string>(), "required option is missing"});
  return problems;
}

void check_options_schema(const json& schema, const std::string& where) {
  check_schema(schema, where);
  if (schema.contains("type") && !allows_type(schema, "object"))
    throw ConfigError(where + ".type",
                      "the options are a JSON object, so the schema's type must be \"object\", "
                      "got " +
                          json_text(schema["type"]));
}

void check_schema(const json& schema, const std::string& where) {
  if (!schema.is_object()) throw ConfigError(where, "a schema must be a JSON object");
  for (auto it = schema.begin(); it != schema.end(); ++it)
    if (!known_keywords().count(it.key()))
      throw ConfigError(where, "schema keyword '" + it.key() + "' is not supported");
  // The values of the keywords, so that validation itself can never fail on a bad schema.
  static const std::set<std::string> types = {"object", "array",   "string", "integer",
                                              "number", "boolean", "null"};
  if (schema.contains("type")) {
    const json& t = schema["type"];
    const bool ok =
        (t.is_string() && types.count(t.get<std::string>())) ||
        (t.is_array() && !t.empty() && std::all_of(t.begin(), t.end(), [&](const json& x) {
           return x.is_string() && types.count(x.get<std::string>());
         }));
    if (!ok) throw ConfigError(where + ".type", "expected a type name or a list of them");
  }
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
    if (schema.contains(k) && !schema[k].is_number())
      throw ConfigError(where + "." + k, "expected a number");
  if (schema.contains("minLength") &&
      !(schema["minLength"].is_number_integer() && schema["minLength"].get<std::int64_t>() >= 0))
    throw ConfigError(where + ".minLength", "expected a non-negative integer");
  for (const char* k : {"enum", "required"})
    if (schema.contains(k) && !schema[k].is_array())
      throw ConfigError(where + "." + k, "expected a list");
  if (schema.contains("required"))
    for (const auto& r : schema["required"])
      if (!r.is_string()) throw ConfigError(where + ".required", "expected a list of names");
  if (schema.contains("properties") && !schema["properties"].is_object())
    throw ConfigError(where + ".properties", "expected an object");
  if (schema.contains("additionalProperties") && !schema["additionalProperties"].is_boolean() &&
      !schema["additionalProperties"].is_object())
    throw ConfigError(where + ".additionalProperties", "expected true, false or a schema");
  if (schema.contains("properties"))
    for (auto it = schema["properties"].begin(); it != schema["properties"].end(); ++it)
      check_schema(it.value(), where + ".properties." + it.key());
  if (schema.contains("items")) check_schema(schema["items"], where + ".items");
  if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object())
    check_schema(schema["additionalProperties"], where + ".additionalProperties");
  // A default must be a value the schema accepts: create() is promised well-typed options.
  if (schema.contains("default")) {
    try {
      check(schema, schema["default"], "");
    } catch (const Violation& v) {
      throw ConfigError(where + ".default", "the default " + json_text(schema["default"]) +
                                                " does not fit the schema" +
                                                (v.path.empty() ? "" : " at " + v.path) + ": " +
                                                v.what);
    }
  }
}

}  // namespace tandem
