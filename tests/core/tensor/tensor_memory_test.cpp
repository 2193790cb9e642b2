// Host tensors are bounded by the machine's memory (or TANDEM_HOST_MEMORY_LIMIT): a tensor that
// cannot fit is a ShapeError naming the sizes, and what live tensors hold is counted and given
// back when they go.
#include <gtest/gtest.h>

#include <string>

#include "tandem/error.hpp"
#include "tandem/tensor.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

// The "tensors hold N MiB" of the error for a tensor far beyond any machine.
long held_mib_when_refused() {
  try {
    Tensor t({std::int64_t{1} << 50});
    ADD_FAILURE() << "a tensor of 2^50 floats was allocated";
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("a tensor of 1125899906842624 values (4294967296 MiB) does not fit in "
                        "host memory"),
              std::string::npos)
        << what;
    const auto at = what.find("tensors hold ");
    if (at != std::string::npos) return std::stol(what.substr(at + 13));
    ADD_FAILURE() << what;
  }
  return -1;
}

TEST(TensorMemory, ATensorBeyondHostMemoryIsAShapeErrorAndLiveTensorsAreCounted) {
  const long before = held_mib_when_refused();
  {
    Tensor big({std::int64_t{64} << 18});  // 64 MiB
    EXPECT_GE(held_mib_when_refused(), before + 64);
  }
  EXPECT_EQ(held_mib_when_refused(), before);  // given back
  Tensor small({4});                           // and allocation goes on
  EXPECT_EQ(small[3], 0.0f);
}

}  // namespace
}  // namespace tandem
