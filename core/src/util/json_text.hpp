// Reading JSON text from outside (config files, --set values, the configs a checkpoint stores,
// plugin option requests, checkpoint indexes) with a bound on its nesting: no config comes near
// kMaxJsonDepth levels, and deeper text would let code that walks a document recursively (error
// messages that print a value, copies) exhaust the stack — a crash instead of an error.
// Stateless; any thread.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

constexpr int kMaxJsonDepth = 512;

/// Thrown by parse_json_text for well-formed text it will not read: what() says why.
class JsonTextRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A document nested deeper than kMaxJsonDepth (what() says so).
class JsonTooDeep : public JsonTextRefused {
 public:
  using JsonTextRefused::JsonTextRefused;
};

/// nlohmann::json::parse(text) with the depth bound: throws nlohmann::json::parse_error for a
/// syntax error (as parse does), JsonTooDeep for a document nested too deep and JsonTextRefused
/// for a number no double holds (1e400).
nlohmann::json parse_json_text(const std::string& text);

/// Where `text` is not valid UTF-8: the offset of its first bad byte, else npos. JSON text must
/// be UTF-8 (RFC 8259); a string that is not cannot be written back as JSON.
std::size_t invalid_utf8_at(const std::string& text);

}  // namespace tandem

TANDEM_INTERNAL_API_END
