// The CPU backend's strided views (NumPy's basic indexing: the indexing layer), split across
// threads by rows of the view's last axis.
#include <cstring>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

namespace {

// Calls f(row, first, step) for each row of the view's last axis: the row's first view index and
// the source position of its first value, the source step along it.
template <typename F>
void for_each_view_row(const StridedView& v, F&& f) {
  const std::int64_t cols = v.rank > 0 ? v.dims[v.rank - 1] : 1;
  const std::int64_t step = v.rank > 0 ? v.strides[v.rank - 1] : 1;
  const std::int64_t rows = math::view_size(v) / cols;
  cpu::parallel_for(rows, 64, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) f(r * cols, math::view_source(v, r * cols), cols, step);
  });
}

}  // namespace

void CpuBackend::gather_view(const StridedView& v, const Tensor& src, Tensor& dst) {
  require_device(*this, src, "gather_view");
  require_device(*this, dst, "gather_view");
  check_strided_view("gather_view", v, src, dst);
  const float* in = src.data();
  float* out = dst.data();
  for_each_view_row(v, [&](std::int64_t k, std::int64_t at, std::int64_t cols, std::int64_t step) {
    if (step == 1) {
      std::memcpy(out + k, in + at, static_cast<std::size_t>(cols) * sizeof(float));
      return;
    }
    for (std::int64_t j = 0; j < cols; ++j) out[k + j] = in[at + j * step];
  });
}

void CpuBackend::scatter_view(const StridedView& v, const Tensor& src, Tensor& dst) {
  require_device(*this, src, "scatter_view");
  require_device(*this, dst, "scatter_view");
  check_strided_view("scatter_view", v, dst, src);
  const float* in = src.data();
  float* out = dst.data();
  for_each_view_row(v, [&](std::int64_t k, std::int64_t at, std::int64_t cols, std::int64_t step) {
    if (step == 1) {
      std::memcpy(out + at, in + k, static_cast<std::size_t>(cols) * sizeof(float));
      return;
    }
    for (std::int64_t j = 0; j < cols; ++j) out[at + j * step] = in[k + j];
  });
}

}  // namespace tandem::backend
