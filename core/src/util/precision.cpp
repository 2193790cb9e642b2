#include "util/precision.hpp"

#include "tandem/error.hpp"

namespace tandem {

Precision parse_precision(const std::string& text, const std::string& path) {
  if (text == "fp32") return Precision::fp32;
  if (text == "tf32") return Precision::tf32;
  throw ConfigError(path, "unknown precision '" + text + "'; expected \"fp32\" or \"tf32\"");
}

}  // namespace tandem
