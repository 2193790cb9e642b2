// The host memory of tensors, as Tensor's allocator counts it (tensor.cpp): each host tensor's
// values, 4 bytes each (the allocation itself is rounded up to 64 bytes). Device tensors (a
// DeviceMemory's) and memory that libraries allocate for themselves (oneDNN's scratchpads) are
// not counted.
#pragma once

#include <cstdint>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// Bytes of host tensor storage allocated on the calling thread less those freed on it. The
/// difference of two readings on one thread, around work whose tensors are made and released on
/// that thread alone, is what that work still holds. Lock-free; each thread reads its own count.
std::int64_t host_tensor_bytes_on_this_thread();

}  // namespace tandem

TANDEM_INTERNAL_API_END
