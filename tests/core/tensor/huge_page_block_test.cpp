// allocate_huge_page_block: blocks of 2 MiB and more start on a 2 MiB boundary and, where the
// kernel offers transparent huge pages on advice, are backed by them once written; smaller blocks
// are ordinary 64-byte aligned ones. Checked against the kernel's own account (/proc/self/smaps).
#include "tensor/huge_page_block.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tandem/tensor.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::uintptr_t address(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

// The transparent huge page mode in force: "always", "madvise" or "never" (the bracketed one).
std::string huge_page_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto open = text.find('[');
  const auto close = text.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return "";
  return text.substr(open + 1, close - open - 1);
}

// The AnonHugePages of the mapping that holds `p`, in kB, as /proc/self/smaps states it.
long anon_huge_kb_of_mapping_holding(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> start >> dash >> end && dash == '-') {
      inside = start <= address(p) && address(p) < end;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0)
      return std::stol(line.substr(std::strlen("AnonHugePages:")));
  }
  return -1;
}

TEST(HugePageBlock, SmallBlocksAreSixtyFourByteAlignedAndLargeOnesStartOnAHugePage) {
  void* small = allocate_huge_page_block(kMiB + 64);
  void* large = allocate_huge_page_block(3 * kMiB + 192);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(address(small) % 64, 0u);
  EXPECT_EQ(address(large) % kHugePageBytes, 0u);
  std::memset(small, 0x5a, kMiB + 64);
  std::memset(large, 0xa5, 3 * kMiB + 192);
  EXPECT_EQ(static_cast<unsigned char*>(large)[3 * kMiB + 191], 0xa5);
  std::free(small);
  std::free(large);
}

// Where the kernel offers huge pages on advice, a written block of several huge pages is backed by
// at least one (under AddressSanitizer too: its allocator honours the alignment and the advice).
TEST(HugePageBlock, AWrittenLargeBlockIsBackedByHugePagesWhereTheKernelOffersThem) {
  const std::string mode = huge_page_mode();
  if (mode != "madvise" && mode != "always")
    GTEST_SKIP() << "transparent huge pages are '" << mode << "' on this machine";
  const std::size_t bytes = 8 * kHugePageBytes;
  void* block = allocate_huge_page_block(bytes);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, bytes);
  const long huge_kb = anon_huge_kb_of_mapping_holding(block);
  std::free(block);
  EXPECT_GE(huge_kb, static_cast<long>(kHugePageBytes / 1024)) << "mode " << mode;
}

// Tensors of several huge pages get theirs the same way (tensor.cpp's allocator).
TEST(HugePageBlock, LargeTensorsStartOnAHugePage) {
  Tensor t({3, 1 << 20});  // 12 MiB
  EXPECT_EQ(address(t.data()) % kHugePageBytes, 0u);
  Tensor small({1000});
  EXPECT_EQ(address(small.data()) % 64, 0u);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
