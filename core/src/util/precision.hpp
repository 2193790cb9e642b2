// Precision: how matrix products are computed, the run's "precision" key.
//
// "fp32" (the default) computes every product in full float32 on every device. "tf32" lets the
// tensor cores of CUDA GPUs (Ampere and later) round the inputs of matrix products and
// convolutions to TF32 (10-bit mantissa) and accumulate in float32 — PyTorch's allow_tf32, Keras'
// default on such GPUs: several times faster, about 1e-3 relative error. CPU replicas have no
// TF32 and compute in float32 under it.
//
// "bf16" and "fp16" are mixed precision as Keras' mixed_bfloat16 / mixed_float16 policies mean
// it: the operands of every matrix product and convolution are rounded to bfloat16 (8-bit
// mantissa) or float16 (10-bit mantissa, 5-bit exponent), the products accumulate in float32, and
// everything else — weights (the master copy the optimizer updates), optimizer state, activations
// between layers, losses, softmax, normalization statistics — stays float32. bf16 runs on CPUs
// with AVX-512 BF16 instructions and on CUDA GPUs; fp16 only on CUDA GPUs, with dynamic loss
// scaling. Plain data, thread-safe.
#pragma once

#include <optional>
#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

enum class Precision { fp32, tf32, bf16, fp16 };

/// "fp32", "tf32", "bf16" or "fp16".
std::string precision_name(Precision p);

/// One of the names above; throws ConfigError naming `path` for anything else.
Precision parse_precision(const std::string& text, const std::string& path);

/// The precision a Keras dtype policy name selects: "float32" fp32, "mixed_bfloat16" bf16,
/// "mixed_float16" fp16. Pure low-precision policies ("bfloat16", "float16": weights kept in the
/// low precision too) and anything else throw ConfigError naming `path`.
Precision precision_of_policy(const std::string& policy, const std::string& path);

/// Keras' policy name for a precision ("float32" for fp32 and tf32).
std::string policy_name(Precision p);

/// Whether products round their operands to a 16-bit float (bf16, fp16).
inline bool is_mixed(Precision p) {
  return p == Precision::bf16 || p == Precision::fp16;
}

}  // namespace tandem

TANDEM_INTERNAL_API_END
