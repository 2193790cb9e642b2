#include "tandem/options_schema.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "tandem/config_object.hpp"
#include "tandem/error.hpp"

namespace tandem {

using nlohmann::json;

namespace {

bool has_type(const json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "integer")
    return value.is_number_integer() ||
           (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>());
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return false;
}

std::string types_text(const json& type) {
  if (type.is_string()) return type.get<std::string>();
  std::string s;
  for (const auto& t : type) s += (s.empty() ? "" : " or ") + t.get<std::string>();
  return s;
}

json validate(const json& schema, const json& value, const std::string& path) {
  if (schema.contains("type")) {
    const json& type = schema["type"];
    bool ok = false;
    if (type.is_string())
      ok = has_type(value, type.get<std::string>());
    else
      for (const auto& t : type) ok = ok || has_type(value, t.get<std::string>());
    if (!ok)
      throw ConfigError(path, "expected " + types_text(type) + ", got " + json_type_name(value) +
                                  " " + value.dump());
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == value;
    if (!found)
      throw ConfigError(path, "expected one of " + schema["enum"].dump() + ", got " + value.dump());
  }
  if (value.is_number()) {
    const double v = value.get<double>();
    auto bound = [&](const char* key, bool ok, const char* relation) {
      if (schema.contains(key) && !ok)
        throw ConfigError(path, "expected a value " + std::string(relation) + " " +
                                    schema[key].dump() + ", got " + value.dump());
    };
    if (schema.contains("minimum")) bound("minimum", v >= schema["minimum"].get<double>(), ">=");
    if (schema.contains("maximum")) bound("maximum", v <= schema["maximum"].get<double>(), "<=");
    if (schema.contains("exclusiveMinimum"))
      bound("exclusiveMinimum", v > schema["exclusiveMinimum"].get<double>(), ">");
    if (schema.contains("exclusiveMaximum"))
      bound("exclusiveMaximum", v < schema["exclusiveMaximum"].get<double>(), "<");
  }
  if (value.is_string() && schema.contains("minLength") &&
      value.get<std::string>().size() < schema["minLength"].get<std::size_t>())
    throw ConfigError(path, "expected at least " + schema["minLength"].dump() + " characters");
  if (value.is_array() && schema.contains("items")) {
    json out = json::array();
    for (std::size_t i = 0; i < value.size(); ++i)
      out.push_back(validate(schema["items"], value[i], path + "[" + std::to_string(i) + "]"));
    return out;
  }
  if (value.is_object() &&
      (schema.contains("properties") || schema.contains("additionalProperties"))) {
    json out = value;
    const json props = schema.value("properties", json::object());
    for (auto it = value.begin(); it != value.end(); ++it) {
      const std::string child = json_path_join(path, it.key());
      if (props.contains(it.key())) {
        out[it.key()] = validate(props[it.key()], it.value(), child);
      } else if (schema.contains("additionalProperties")) {
        const json& extra = schema["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>()) {
          std::string known;
          for (auto p = props.begin(); p != props.end(); ++p)
            known += (known.empty() ? "" : ", ") + p.key();
          throw ConfigError(child, "unknown option (known: " + known + ")");
        }
        if (extra.is_object()) out[it.key()] = validate(extra, it.value(), child);
      }
    }
    for (const auto& r : schema.value("required", json::array()))
      if (!value.contains(r.get<std::string>()))
        throw ConfigError(json_path_join(path, r.get<std::string>()), "required option is missing");
    for (auto p = props.begin(); p != props.end(); ++p)
      if (!out.contains(p.key()) && p.value().contains("default"))
        out[p.key()] = p.value()["default"];
    return out;
  }
  return value;
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
  return validate(schema, options.is_null() ? json::object() : options, path);
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
}

}  // namespace tandem
