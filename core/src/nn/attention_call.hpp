// Private (nn): what Keras' two attention layers (MultiHeadAttention, Attention) share in their
// calls: the call options they take, the Dropout of their attention weights, and the mask of
// which keys each query sees from per-step masks. Plain functions; any thread (the tensors are
// the caller's, on `ops`' device).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/ops.hpp"
#include "nn/dropout.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// The call's use_causal_mask (`fallback` without it), from its keyword options; the defaults of
/// return_attention_scores and training are accepted, anything else is a ConfigError at `path`
/// naming the layer (`label`).
bool read_causal_option(const nlohmann::json& options, const std::string& path,
                        const std::string& label, bool fallback);

/// The Dropout of a layer's attention weights ("<layer>/dropout"), or null without a rate.
std::unique_ptr<Dropout> attention_dropout(const std::string& layer, double rate,
                                           std::optional<std::uint64_t> seed);

/// out (batch, tq, tv) = each sample's outer product of `query_rows` (batch, tq; null: ones,
/// written into `ones`) and `keys` (batch, tv): the keys each query sees.
void keys_for_every_query(backend::Backend& ops, const Tensor* query_rows, const Tensor& keys,
                          std::int64_t batch, std::int64_t tq, std::int64_t tv, Tensor& ones,
                          Tensor& out);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
