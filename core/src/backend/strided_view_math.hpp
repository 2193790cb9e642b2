// A strided view of a tensor's values — NumPy's basic indexing (x[:, 0], x[..., 1:5:2],
// x[:, ::-1]) seen from the flat buffer: the view's values in row-major order over its dims, each
// at a fixed offset plus a step per axis (negative for a reversed axis). Backend::gather_view
// copies a view's values out, scatter_view puts values back at its positions (the gradient).
// Shared by the CPU backend and the CUDA kernels.
//
// Header rules: kernel_math.hpp's (compiles with nvcc -std=c++17).
#pragma once

#include <cstdint>

#include "backend/kernel_math.hpp"

namespace tandem::backend {

struct StridedView {
  static constexpr int kMaxRank = 8;
  int rank = 0;                         // axes in use, at most kMaxRank
  std::int64_t dims[kMaxRank] = {};     // the view's shape (row-major)
  std::int64_t strides[kMaxRank] = {};  // each axis's step through the source, in values
  std::int64_t offset = 0;              // the source position of the view's first value
};

namespace math {

/// The number of values the view holds.
TANDEM_HD inline std::int64_t view_size(const StridedView& v) {
  std::int64_t n = 1;
  for (int a = 0; a < v.rank; ++a) n *= v.dims[a];
  return n;
}

/// The source position of the view's value k (row-major over dims).
TANDEM_HD inline std::int64_t view_source(const StridedView& v, std::int64_t k) {
  std::int64_t at = v.offset;
  for (int a = v.rank - 1; a >= 0; --a) {
    at += (k % v.dims[a]) * v.strides[a];
    k /= v.dims[a];
  }
  return at;
}

}  // namespace math

}  // namespace tandem::backend
