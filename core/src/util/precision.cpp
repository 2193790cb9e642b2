#include "util/precision.hpp"

#include "tandem/error.hpp"

namespace tandem {

std::string precision_name(Precision p) {
  switch (p) {
    case Precision::tf32:
      return "tf32";
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "fp16";
    case Precision::fp32:
      break;
  }
  return "fp32";
}

Precision parse_precision(const std::string& text, const std::string& path) {
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16, Precision::fp16})
    if (text == precision_name(p)) return p;
  throw ConfigError(
      path, "unknown precision '" + text + "'; expected \"fp32\", \"tf32\", \"bf16\" or \"fp16\"");
}

Precision precision_of_policy(const std::string& policy, const std::string& path) {
  if (policy == "float32") return Precision::fp32;
  if (policy == "mixed_bfloat16") return Precision::bf16;
  if (policy == "mixed_float16") return Precision::fp16;
  if (policy == "bfloat16" || policy == "float16")
    throw ConfigError(path, "the dtype policy '" + policy +
                                "' keeps the weights in 16 bits; Tandem keeps float32 weights "
                                "and computes products in 16 bits: use 'mixed_" +
                                (policy == "bfloat16" ? std::string("bfloat16") : "float16") + "'");
  throw ConfigError(path, "unknown dtype policy '" + policy +
                              "'; expected \"float32\", \"mixed_bfloat16\" or \"mixed_float16\"");
}

std::string policy_name(Precision p) {
  if (p == Precision::bf16) return "mixed_bfloat16";
  if (p == Precision::fp16) return "mixed_float16";
  return "float32";
}

}  // namespace tandem
