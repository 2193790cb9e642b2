// Uniform rows: many Rng streams filled at once, each row exactly as Rng::fill_uniform fills it.
//
// A synthetic dataset draws each sample from its own stream (Rng(Rng::derive(seed, i))); one
// stream is a chain of dependent xoshiro256** steps, so a row of 8,000 values costs 8,000 steps
// in sequence (about 19 ms for a 2,048 x 8,000 batch, beside a 250 ms training step on the two
// cores it shares; 5-6 ms here). On a CPU with AVX-512 the rows here advance eight streams per
// vector, one in each 64-bit lane, with the same arithmetic: the bits written and each Rng's state
// afterwards are those of calling fill_uniform row by row, which is what the function does
// elsewhere.
//
// Ownership: the caller's rngs and output; nothing is kept. Thread-safety: call it from one thread
// per set of rngs and rows (it is a pure function of them).
#pragma once

#include <cstdint>
#include <span>

#include "tandem/rng.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// For each r, rngs[r].fill_uniform(out + r * stride, n): `n` uniform floats in [0, 1) into row r,
/// advancing rngs[r] by n steps. Rows must not overlap (stride >= n).
void fill_uniform_rows(std::span<Rng> rngs, float* out, std::int64_t n, std::int64_t stride);

/// Whether fill_uniform_rows runs its AVX-512 loop on this CPU (tests report which they checked).
bool uniform_rows_vectorized();

}  // namespace tandem

TANDEM_INTERNAL_API_END
