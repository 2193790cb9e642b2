// The CPU backend's data-movement operations for the merging layers, against hand-computed
// values; a block that does not fit is refused.
#include <gtest/gtest.h>

#include <stdexcept>

#include "backend/ops.hpp"

namespace tandem::backend {
namespace {

std::vector<float> values_of(Tensor& t) {
  return {t.values().begin(), t.values().end()};
}

TEST(CpuBackend, AddSumsElementWiseAndMayWriteIntoAnInput) {
  Tensor a = Tensor::from_vector({2, 2}, {1, 2, 3, 4});
  const Tensor b = Tensor::from_vector({2, 2}, {10, 20, 30, 40});
  Tensor out({2, 2});
  cpu_backend().add(a, b, out);
  EXPECT_EQ(values_of(out), (std::vector<float>{11, 22, 33, 44}));
  cpu_backend().add(a, b, a);
  EXPECT_EQ(values_of(a), (std::vector<float>{11, 22, 33, 44}));
  Tensor shorter({3});
  EXPECT_THROW(cpu_backend().add(b, shorter, out), std::logic_error);
}

TEST(CpuBackend, CopyColumnsMovesABlockBetweenMatricesOfOneRowCount) {
  // src: 2 rows of 3; its columns [1, 3) into columns [2, 4) of a 2 x 5 matrix of zeros.
  const Tensor src = Tensor::from_vector({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor dst({2, 5});
  cpu_backend().copy_columns(src, 3, 1, dst, 5, 2, 2);
  EXPECT_EQ(values_of(dst), (std::vector<float>{0, 0, 2, 3, 0, 0, 0, 5, 6, 0}));
  try {
    cpu_backend().copy_columns(src, 3, 2, dst, 5, 0, 2);  // columns [2, 4) of 3
    FAIL() << "a block beyond the source's columns must be refused";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("do not fit"), std::string::npos) << e.what();
  }
  Tensor three_rows({3, 5});
  EXPECT_THROW(cpu_backend().copy_columns(src, 3, 0, three_rows, 5, 0, 3), std::logic_error);
}

}  // namespace
}  // namespace tandem::backend
