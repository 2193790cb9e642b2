// Private (CUDA module, plain C++ so the CPU tests check it): which gradients a CUDA replica sums
// together across GPUs, and when (cuda_replica.cpp).
//
// The trainable gradients are one flat array in layer order; the backward pass runs from the last
// layer to the first. A bucket is a run of whole layers' gradients, from the back: it closes (its
// all-reduce is queued) after the backward of its first layer once it holds at least the cap —
// `first_cap` for the first bucket (small, so reducing starts early), `cap` after — and the layer
// owning offset 0 always closes the last one. Together the buckets cover [0, total) exactly once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tandem/error.hpp"

namespace tandem::cuda {

struct GradientBucket {
  std::size_t after_layer = 0;  // queued once this layer's backward has run
  std::int64_t begin = 0;       // floats of the flat gradient array, [begin, end)
  std::int64_t end = 0;
};

/// layer_ranges[l]: layer l's trainable gradients [begin, end) in the flat array of `total`
/// floats (begin == end: none). They must tile [0, total) in layer order; otherwise RunError.
/// Buckets in the order they are queued (last layers first).
inline std::vector<GradientBucket> plan_gradient_buckets(
    const std::vector<std::pair<std::int64_t, std::int64_t>>& layer_ranges, std::int64_t total,
    std::int64_t first_cap, std::int64_t cap) {
  std::vector<GradientBucket> buckets;
  std::int64_t end = total, limit = first_cap;
  for (std::size_t l = layer_ranges.size(); l-- > 0;) {
    const auto [begin, layer_end] = layer_ranges[l];
    if (begin == layer_end) continue;  // nothing trainable here
    if (layer_end != end || begin > layer_end)
      throw RunError("gradient buckets: layer " + std::to_string(l) + "'s gradients [" +
                     std::to_string(begin) + ", " + std::to_string(layer_end) +
                     ") do not end where the next layer's begin (" + std::to_string(end) + ")");
    // The bucket so far runs from `begin` to the end of the last closed bucket (or total).
    const std::int64_t open_end = buckets.empty() ? total : buckets.back().begin;
    if (open_end - begin >= limit || begin == 0) {
      buckets.push_back({l, begin, open_end});
      limit = cap;
    }
    end = begin;
  }
  if (end != 0)
    throw RunError("gradient buckets: the layers' gradients cover [" + std::to_string(end) + ", " +
                   std::to_string(total) + ") of " + std::to_string(total) + " floats, not all");
  return buckets;
}

}  // namespace tandem::cuda
