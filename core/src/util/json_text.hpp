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

/// Thrown by parse_json_text for a document nested deeper than kMaxJsonDepth; what() says so
/// and where (the byte offset).
class JsonTooDeep : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// nlohmann::json::parse(text) with the depth bound: throws nlohmann::json::parse_error for a
/// syntax error (as parse does) and JsonTooDeep for a document nested too deep.
nlohmann::json parse_json_text(const std::string& text);

}  // namespace tandem

TANDEM_INTERNAL_API_END
