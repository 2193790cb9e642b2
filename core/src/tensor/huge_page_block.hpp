// Host blocks that the kernel may back with 2 MiB transparent huge pages.
//
// A new block's pages cost a page fault each at their first write. On the VMs this project runs on
// (shadow page tables) that is ~11 µs a 4 KiB page: 0.9-1.0 s to first touch 256 MiB, where the
// same block in 2 MiB huge pages takes 24 ms (docs/benchmarks.md, "Host memory"). Tensor's
// allocator (tensor.cpp) takes its new blocks from here, and so does the buffer a checkpoint is
// built in (io/checkpoint_file.cpp).
//
// Blocks of kHugePageBytes and more start on a 2 MiB boundary and are advised MADV_HUGEPAGE, which
// the kernel follows when /sys/kernel/mm/transparent_hugepage/enabled is "madvise" or "always"
// and ignores when it is "never" (the block is then an ordinary one). Smaller blocks are 64-byte
// aligned. Thread-safe, as malloc is.
#pragma once

#include <cstddef>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// The size of a transparent huge page on x86-64 and AArch64 with 4 KiB base pages.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// `bytes` of host memory, contents unspecified, aligned to 2 MiB and advised for huge pages
/// when `bytes` >= kHugePageBytes, else aligned to 64 bytes. The caller owns it and gives it back
/// with std::free (or resizes it with std::realloc, which keeps the advice but not the
/// alignment). nullptr when no memory is left.
void* allocate_huge_page_block(std::size_t bytes);

}  // namespace tandem

TANDEM_INTERNAL_API_END
