#include "tensor/huge_page_block.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace tandem {

void* allocate_huge_page_block(std::size_t bytes) {
  const std::size_t alignment = bytes < kHugePageBytes ? 64 : kHugePageBytes;
  void* block = nullptr;
  if (posix_memalign(&block, alignment, bytes) != 0) return nullptr;
  // Advice only: a kernel without transparent huge pages (EINVAL) leaves ordinary pages.
  if (alignment == kHugePageBytes) madvise(block, bytes, MADV_HUGEPAGE);
  return block;
}

}  // namespace tandem
