// Precision: how matrix products are computed, the run's "precision" key.
//
// "fp32" (the default) computes every product in full float32 on every device. "tf32" lets the
// tensor cores of CUDA GPUs (Ampere and later) round the inputs of matrix products and
// convolutions to TF32 (10-bit mantissa) and accumulate in float32 — PyTorch's allow_tf32, Keras'
// default on such GPUs: several times faster, about 1e-3 relative error. CPU replicas have no
// TF32 and compute in float32 under either setting. Plain data, thread-safe.
#pragma once

#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

enum class Precision { fp32, tf32 };

inline std::string precision_name(Precision p) {
  return p == Precision::tf32 ? "tf32" : "fp32";
}

/// "fp32" or "tf32"; throws ConfigError naming `path` for anything else.
Precision parse_precision(const std::string& text, const std::string& path);

}  // namespace tandem

TANDEM_INTERNAL_API_END
