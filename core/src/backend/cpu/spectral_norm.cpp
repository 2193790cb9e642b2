// The CPU backend's SpectralNormalization update (backend/ops.hpp's spectral_normalize): the
// power iterations' products in double, u Wᵀ a row per part, v W a block of columns per part
// (each column's sum over the rows in row order), so any thread count gives the same bits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

namespace {

// x · min(rsqrt(Σ x²), 1e7) (Keras' ops.normalize with its epsilon 1e-7), in place.
void normalize(std::vector<double>& x) {
  double squares = 0;
  for (double v : x) squares += v * v;
  const double scale = std::min(1.0 / std::sqrt(squares), 1e7);
  for (double& v : x) v *= scale;
}

}  // namespace

void CpuBackend::spectral_normalize(const SpectralNormDesc& d, Tensor& kernel, Tensor& u) {
  require_device(*this, kernel, "spectral_normalize");
  require_device(*this, u, "spectral_normalize");
  check_spectral_norm(d, kernel, u, "spectral_normalize");
  float* w = kernel.data();
  if (std::all_of(w, w + kernel.size(), [](float v) { return v == 0.0f; })) return;
  const std::int64_t rows = d.rows, cols = d.cols;
  std::vector<double> uu(u.data(), u.data() + cols), v(static_cast<std::size_t>(rows)),
      vw(static_cast<std::size_t>(cols));
  for (int it = 0; it < d.iterations; ++it) {
    cpu::parallel_for(rows, 64, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        double s = 0;
        for (std::int64_t c = 0; c < cols; ++c) s += uu[c] * w[r * cols + c];
        v[r] = s;
      }
    });
    normalize(v);
    cpu::parallel_for(cols, 64, [&](std::int64_t c0, std::int64_t c1) {
      for (std::int64_t c = c0; c < c1; ++c) vw[c] = 0;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = c0; c < c1; ++c) vw[c] += v[r] * w[r * cols + c];
    });
    uu = vw;
    normalize(uu);
  }
  // σ = v W uᵀ: the last v W (vw) with the last u.
  double sigma = 0;
  for (std::int64_t c = 0; c < cols; ++c) sigma += vw[c] * uu[c];
  const auto s = static_cast<float>(sigma);
  cpu::parallel_for(kernel.size(), 4096, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) w[i] = w[i] / s;
  });
  for (std::int64_t c = 0; c < cols; ++c) u.data()[c] = static_cast<float>(uu[c]);
}

}  // namespace tandem::backend
