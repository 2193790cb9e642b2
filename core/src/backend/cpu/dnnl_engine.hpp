// The process-wide oneDNN CPU engine, shared by the layers that run oneDNN primitives
// (convolution, pooling). Include only from .cpp files: it brings in <dnnl.hpp>.
#pragma once

#include <dnnl.hpp>

#include <cstdint>
#include <string>

namespace tandem::cpu {

/// One engine for the whole process (creating one is cheap but not free; sharing is thread-safe).
const dnnl::engine& dnnl_engine();

/// A plain user-format memory over `data` (which may be null and set later by set_data_handle).
dnnl::memory dnnl_user_memory(const dnnl::memory::desc& desc, void* data);

/// `batch` plain row-major matrices of rows x cols one after the other (a 2-D desc when batch is
/// 1), each stored transposed (columns contiguous) when `transposed`.
dnnl::memory::desc dnnl_matrix_desc(std::int64_t batch, std::int64_t rows, std::int64_t cols,
                                    bool transposed, dnnl::memory::data_type type);

/// Primitive attributes with a user-managed scratchpad: the layer owns one buffer for all its
/// primitives instead of each primitive allocating its own.
dnnl::primitive_attr dnnl_user_scratchpad();

}  // namespace tandem::cpu
