// Call probe: what each call of a model costs, measured before training on a copy of the model
// run one call at a time — a training forward and backward on rows of zeros. Its time balances
// pipeline stages ("balance": "time", parallel/pipeline_layout.hpp); the memory its layer keeps
// is placement's activation estimate (parallel/placement.hpp).
//
// The model is only read; the copies are the probe's own, made and released on the calling
// thread. Each function takes a moment for small models (a forward and backward of a few rows).
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/model.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// Forward plus backward seconds of each call of a copy of `model` in training mode on `rows`
/// samples of zeros (the fastest of `repeats` passes): what PipelineBalance::time balances.
std::vector<double> measure_call_seconds(const Model& model, std::int64_t rows, int repeats = 3);

/// Per call, the bytes of host tensors its layer holds after a training forward and backward, per
/// row of the batch: its outputs, what it keeps for its backward pass (inputs, masks, normalised
/// values, attention weights) and the gradients it hands back. Measured through Tensor's
/// allocator (tensor/host_tensor_bytes.hpp) on copies of `model` at kProbeRows and twice as many
/// rows, as the difference over kProbeRows rows: what does not grow with the batch (weight
/// gradients, per-channel statistics) is left out, and so are a backend's own workspaces, which
/// are not tensors (oneDNN's scratchpads, cuDNN's). Few rows keep the probe quick for large
/// models; two rather than one, so that no layer meets the one-row edge of a batch.
inline constexpr std::int64_t kProbeRows = 2;
std::vector<std::int64_t> measure_call_bytes_per_row(const Model& model);

}  // namespace tandem

TANDEM_INTERNAL_API_END
