#include "util/config_object.hpp"

#include <cctype>
#include <cstdint>

#include <cmath>
#include <sstream>

#include "tandem/error.hpp"

namespace tandem {

using nlohmann::json;

KerasObject read_keras_object(const nlohmann::json& spec, const std::string& path,
                              const char* noun) {
  KerasObject o{"", path, nullptr, path + ".config"};
  if (spec.is_string()) {
    o.name = spec.get<std::string>();
    return o;
  }
  if (!spec.is_object())
    throw ConfigError(path, std::string("expected ") + noun + " or {\"class_name\": ...}, got " +
                                json_type_name(spec));
  ConfigObject obj(spec, path);
  o.name = obj.get_string("class_name");
  o.name_path = obj.path_of("class_name");
  o.config = obj.find("config");
  obj.ignore({"module", "registered_name"});
  obj.finish();
  return o;
}

std::string string_field(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string json_type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "a list";
    case json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

std::string json_path_join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

namespace {

std::string brief(const json& value) {
  std::string s = value.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

[[noreturn]] void wrong_type(const std::string& path, const char* expected, const json& got) {
  throw ConfigError(path, std::string("expected ") + expected + ", got " + json_type_name(got) +
                              (got.is_null() ? "" : " " + brief(got)));
}

}  // namespace

ConfigObject::ConfigObject(const json& value, std::string path)
    : value_(value), path_(std::move(path)) {
  if (!value_.is_object()) wrong_type(path_.empty() ? "<root>" : path_, "an object", value_);
}

bool ConfigObject::has(const std::string& key) const {
  auto it = value_.find(key);
  if (it == value_.end()) return false;
  if (it->is_null()) read_.insert(key);  // asked about: null is the key left out, not unknown
  return !it->is_null();
}

bool ConfigObject::given(const std::string& key) const {
  return value_.contains(key);
}

const json& ConfigObject::at(const std::string& key) {
  read_.insert(key);
  auto it = value_.find(key);
  if (it == value_.end()) throw ConfigError(path_of(key), "required key is missing");
  return *it;
}

const json* ConfigObject::find(const std::string& key) {
  read_.insert(key);
  auto it = value_.find(key);
  if (it == value_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string ConfigObject::get_string(const std::string& key) {
  const json& v = at(key);
  if (!v.is_string()) wrong_type(path_of(key), "a string", v);
  return v.get<std::string>();
}

std::string ConfigObject::get_string(const std::string& key, const std::string& fallback) {
  return has(key) ? get_string(key) : (read_.insert(key), fallback);
}

std::int64_t ConfigObject::get_int(const std::string& key) {
  const json& v = at(key);
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t{INT64_MAX})
    throw ConfigError(path_of(key), "the integer " + v.dump() + " is out of range (at most " +
                                        std::to_string(INT64_MAX) + ")");
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9e15)
      return static_cast<std::int64_t>(d);
  }
  wrong_type(path_of(key), "an integer", v);
}

std::int64_t ConfigObject::get_int(const std::string& key, std::int64_t fallback) {
  return has(key) ? get_int(key) : (read_.insert(key), fallback);
}

double ConfigObject::get_number(const std::string& key) {
  const json& v = at(key);
  if (!v.is_number()) wrong_type(path_of(key), "a number", v);
  double d = v.get<double>();
  if (!std::isfinite(d)) throw ConfigError(path_of(key), "expected a finite number");
  return d;
}

double ConfigObject::get_number(const std::string& key, double fallback) {
  return has(key) ? get_number(key) : (read_.insert(key), fallback);
}

bool ConfigObject::get_bool(const std::string& key) {
  const json& v = at(key);
  if (!v.is_boolean()) wrong_type(path_of(key), "true or false", v);
  return v.get<bool>();
}

bool ConfigObject::get_bool(const std::string& key, bool fallback) {
  return has(key) ? get_bool(key) : (read_.insert(key), fallback);
}

std::vector<std::optional<std::int64_t>> ConfigObject::get_int_list(const std::string& key,
                                                                    bool allow_null) {
  const json& v = at(key);
  if (!v.is_array()) wrong_type(path_of(key), "a list of integers", v);
  std::vector<std::optional<std::int64_t>> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const json& e = v[i];
    const std::string p = path_of(key) + "[" + std::to_string(i) + "]";
    if (e.is_null() && allow_null) {
      out.emplace_back(std::nullopt);
    } else if (e.is_number_integer() &&
               !(e.is_number_unsigned() && e.get<std::uint64_t>() > std::uint64_t{INT64_MAX})) {
      out.emplace_back(e.get<std::int64_t>());
    } else {
      wrong_type(p, allow_null ? "an integer or null" : "an integer", e);
    }
  }
  return out;
}

ConfigObject ConfigObject::get_object(const std::string& key) {
  const json& v = at(key);
  if (!v.is_object()) wrong_type(path_of(key), "an object", v);
  return ConfigObject(v, path_of(key));
}

std::int64_t ConfigObject::positive_int(const std::string& key) {
  std::int64_t v = get_int(key);
  if (v <= 0 || v > kMaxConfigSize)
    throw ConfigError(path_of(key), "expected a positive integer up to " +
                                        std::to_string(kMaxConfigSize) + ", got " +
                                        std::to_string(v));
  return v;
}

std::int64_t ConfigObject::positive_int(const std::string& key, std::int64_t fallback) {
  return has(key) ? positive_int(key) : (read_.insert(key), fallback);
}

std::int64_t ConfigObject::int_in(const std::string& key, std::int64_t fallback, std::int64_t lo,
                                  std::int64_t hi) {
  const std::int64_t v = get_int(key, fallback);
  if (v < lo || v > hi)
    throw ConfigError(path_of(key), "expected an integer from " + std::to_string(lo) + " to " +
                                        std::to_string(hi) + ", got " + std::to_string(v));
  return v;
}

double ConfigObject::number_in(const std::string& key, double fallback, double lo, double hi,
                               bool lo_open, bool hi_open) {
  double v = get_number(key, fallback);
  bool ok = (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  if (!ok) {
    std::ostringstream msg;
    msg << "expected a number in " << (lo_open ? '(' : '[') << lo << ", " << hi
        << (hi_open ? ')' : ']') << ", got " << v;
    throw ConfigError(path_of(key), msg.str());
  }
  return v;
}

namespace {

// 'a', 'b', 'c': the choices as an error message lists them.
std::string quoted_list(const std::vector<std::string>& choices) {
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + ("'" + c + "'");
  return list;
}

}  // namespace

std::string ConfigObject::one_of(const std::string& key, const std::string& fallback,
                                 const std::vector<std::string>& choices) {
  std::string v = get_string(key, fallback);
  for (const auto& c : choices)
    if (c == v) return v;
  throw ConfigError(path_of(key), "expected one of " + quoted_list(choices) + ", got '" + v + "'");
}

std::string ConfigObject::one_of_any_case(const std::string& key, const std::string& fallback,
                                          const std::vector<std::string>& choices) {
  const std::string given = get_string(key, fallback);
  std::string lower = given;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const auto& c : choices)
    if (c == lower) return c;
  throw ConfigError(path_of(key), "expected one of " + quoted_list(choices) +
                                      " (in any case), got '" + given + "'");
}

void ConfigObject::ignore(std::initializer_list<const char*> keys) {
  for (const char* k : keys) read_.insert(k);
}

void ConfigObject::finish() const {
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    if (!read_.count(it.key())) throw ConfigError(path_of(it.key()), "unknown key");
  }
}

}  // namespace tandem
