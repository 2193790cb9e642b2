// The CUDA building blocks (core/src/cuda/ops) against references computed here on the CPU in
// double precision, on random data: fp32 within 1e-5 of the largest reference value, tf32 within
// 3e-3; the optimizer updates bit for bit; every sum the same bits run to run. Skipped without a
// usable CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/dense_gemm.hpp"
#include "cuda/ops/device_allocator.hpp"
#include "cuda/ops/kernels.hpp"
#include "gpu/device_scratch.hpp"
#include "gpu/gpu_test_support.hpp"
#include "tandem/error.hpp"

namespace tandem::cuda {
namespace {

using gpu_test::random_vector;
using gpu_test::relative_error;

// Host <-> device through a stream of its own (gpu_test::DeviceScratch), when there is a device.
class GpuTest : public ::testing::Test {
 public:
  void SetUp() override {  // (public: the helpers below are called from free functions too)
    if (!gpu_test::no_device_reason().empty()) return;
    device_ = std::make_unique<gpu_test::DeviceScratch>();
    stream_ = device_->stream();
    allocator_ = &device_->allocator();
  }
  void TearDown() override { device_.reset(); }
  float* upload(const std::vector<float>& host) { return device_->upload(host); }
  float* device_zeros(std::size_t n) { return device_->filled(n, 0.0f); }
  std::vector<float> download(const float* d, std::size_t n) { return device_->download(d, n); }

  std::unique_ptr<gpu_test::DeviceScratch> device_;
  cudaStream_t stream_ = nullptr;
  DeviceAllocator* allocator_ = nullptr;
};

struct DenseCase {
  std::int64_t batch, in, out;
};

float unrounded(float v) { return v; }

// To the nearest bfloat16, ties to even (finite values).
float to_bf16(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// To the nearest IEEE half, ties to even (GCC's _Float16 conversion).
float to_fp16(float v) { return static_cast<float>(static_cast<_Float16>(v)); }

// The three products of a Dense layer against a double-precision reference over the operands as
// the precision rounds them (`round`: none for fp32 and tf32, whose rounding the tolerance covers).
void dense_gemm_case(GpuTest& t, Precision precision, double tolerance, DenseCase c,
                     float (*round)(float) = unrounded) {
  const auto x = random_vector(c.batch * c.in, 1), w = random_vector(c.in * c.out, 2),
             b = random_vector(c.out, 3), dy = random_vector(c.batch * c.out, 4);
  DenseGemm gemm(*t.allocator_, t.stream_, precision);
  float *dx_ = t.upload(x), *dw_ = t.upload(w), *db_ = t.upload(b), *ddy = t.upload(dy);
  // The reference's operands: what the device multiplies (the bias stays float32).
  std::vector<float> rx(x), rw(w), rdy(dy);
  for (auto* v : {&rx, &rw, &rdy}) std::transform(v->begin(), v->end(), v->begin(), round);
  float* y = t.device_zeros(c.batch * c.out);
  float* y_relu = t.device_zeros(c.batch * c.out);
  float* gx = t.device_zeros(c.batch * c.in);
  float* gw = t.device_zeros(c.in * c.out);
  gemm.forward(dx_, dw_, db_, y, c.batch, c.in, c.out, DenseGemm::Epilogue::bias);
  gemm.forward(dx_, dw_, db_, y_relu, c.batch, c.in, c.out, DenseGemm::Epilogue::relu_bias);
  gemm.backward_data(ddy, dw_, gx, c.batch, c.in, c.out);
  gemm.backward_weights(dx_, ddy, gw, c.batch, c.in, c.out);

  std::vector<double> want_y(c.batch * c.out), want_relu(c.batch * c.out),
      want_gx(c.batch * c.in, 0.0), want_gw(c.in * c.out, 0.0);
  for (std::int64_t r = 0; r < c.batch; ++r)
    for (std::int64_t o = 0; o < c.out; ++o) {
      double s = b[o];
      for (std::int64_t i = 0; i < c.in; ++i) s += double(rx[r * c.in + i]) * rw[i * c.out + o];
      want_y[r * c.out + o] = s;
      want_relu[r * c.out + o] = std::max(s, 0.0);
    }
  for (std::int64_t r = 0; r < c.batch; ++r)
    for (std::int64_t i = 0; i < c.in; ++i) {
      double s = 0;
      for (std::int64_t o = 0; o < c.out; ++o) s += double(rdy[r * c.out + o]) * rw[i * c.out + o];
      want_gx[r * c.in + i] = s;
    }
  for (std::int64_t i = 0; i < c.in; ++i)
    for (std::int64_t o = 0; o < c.out; ++o) {
      double s = 0;
      for (std::int64_t r = 0; r < c.batch; ++r) s += double(rx[r * c.in + i]) * rdy[r * c.out + o];
      want_gw[i * c.out + o] = s;
    }
  const std::string shape =
      std::to_string(c.batch) + "x" + std::to_string(c.in) + "x" + std::to_string(c.out);
  EXPECT_LE(relative_error(t.download(y, want_y.size()), want_y), tolerance) << "forward " << shape;
  EXPECT_LE(relative_error(t.download(y_relu, want_relu.size()), want_relu), tolerance)
      << "forward+relu " << shape;
  EXPECT_LE(relative_error(t.download(gx, want_gx.size()), want_gx), tolerance) << "dx " << shape;
  EXPECT_LE(relative_error(t.download(gw, want_gw.size()), want_gw), tolerance) << "dW " << shape;
}

TEST_F(GpuTest, DenseGemmFp32MatchesTheCpu) {
  REQUIRE_DEVICE();
  for (DenseCase c : {DenseCase{128, 784, 256}, DenseCase{37, 300, 1}, DenseCase{1, 5, 3},
                      DenseCase{257, 129, 65}})
    dense_gemm_case(*this, Precision::fp32, 1e-5, c);
}

TEST_F(GpuTest, DenseGemmTf32MatchesTheCpuToTf32Rounding) {
  REQUIRE_DEVICE();
  for (DenseCase c : {DenseCase{128, 784, 256}, DenseCase{64, 500, 300}})
    dense_gemm_case(*this, Precision::tf32, 3e-3, c);
}

// Mixed precision: the device rounds both operands as the reference does and sums in float32, so
// the products agree to float rounding (not to bfloat16's or half's); the unrounded products are
// farther off than that (the rounding is really there).
TEST_F(GpuTest, DenseGemmBf16AndFp16MultiplyTheRoundedOperandsInFloat) {
  REQUIRE_DEVICE();
  for (DenseCase c : {DenseCase{128, 784, 256}, DenseCase{37, 300, 1}, DenseCase{257, 129, 65}}) {
    dense_gemm_case(*this, Precision::bf16, 1e-5, c, to_bf16);
    dense_gemm_case(*this, Precision::fp16, 1e-5, c, to_fp16);
  }
  const DenseCase c{128, 784, 256};
  const auto x = random_vector(c.batch * c.in, 1), w = random_vector(c.in * c.out, 2);
  DenseGemm gemm(*allocator_, stream_, Precision::bf16);
  float* y = device_zeros(c.batch * c.out);
  gemm.forward(upload(x), upload(w), nullptr, y, c.batch, c.in, c.out, DenseGemm::Epilogue::none);
  std::vector<double> exact(c.batch * c.out, 0.0);
  for (std::int64_t r = 0; r < c.batch; ++r)
    for (std::int64_t o = 0; o < c.out; ++o)
      for (std::int64_t i = 0; i < c.in; ++i)
        exact[r * c.out + o] += double(x[r * c.in + i]) * w[i * c.out + o];
  EXPECT_GT(relative_error(download(y, exact.size()), exact), 1e-4);
}

// Batched products (attention's per-head scores) in bf16: every matrix of the batch rounded.
TEST_F(GpuTest, BatchedBf16ProductsRoundEveryMatrix) {
  REQUIRE_DEVICE();
  const std::int64_t m = 7, n = 5, k = 33, batch = 6;
  const auto a = random_vector(m * k * batch, 8), b = random_vector(k * n * batch, 9);
  DenseGemm gemm(*allocator_, stream_, Precision::bf16);
  float* c = device_zeros(m * n * batch);
  // Column-major: A is m x k (ld m), B is k x n (ld k), C m x n (ld m).
  gemm.matmul_batched(false, false, m, n, k, upload(a), m, m * k, upload(b), k, k * n, c, m, m * n,
                      batch);
  std::vector<double> want(m * n * batch, 0.0);
  for (std::int64_t p = 0; p < batch; ++p)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t l = 0; l < k; ++l)
          want[p * m * n + j * m + i] +=
              double(to_bf16(a[p * m * k + l * m + i])) * to_bf16(b[p * k * n + j * k + l]);
  EXPECT_LE(relative_error(download(c, want.size()), want), 1e-5);
}

TEST_F(GpuTest, DenseGemmIsTheSameBitsRunToRun) {
  REQUIRE_DEVICE();
  const std::int64_t batch = 512, in = 2000, out = 500;
  const auto x = random_vector(batch * in, 5), dy = random_vector(batch * out, 6);
  DenseGemm gemm(*allocator_, stream_, Precision::fp32);
  float *dx = upload(x), *ddy = upload(dy);
  float *gw1 = device_zeros(in * out), *gw2 = device_zeros(in * out);
  gemm.backward_weights(dx, ddy, gw1, batch, in, out);
  gemm.backward_weights(dx, ddy, gw2, batch, in, out);
  EXPECT_EQ(download(gw1, in * out), download(gw2, in * out));
}

TEST_F(GpuTest, BiasActivationAndItsGradient) {
  REQUIRE_DEVICE();
  const std::int64_t rows = 33, cols = 70;
  const auto z = random_vector(rows * cols, 7, -4, 4), bias = random_vector(cols, 8),
             dy = random_vector(rows * cols, 9);
  for (Activation act : {Activation::relu, Activation::tanh, Activation::sigmoid}) {
    float* y = upload(z);
    bias_activation(y, upload(bias), rows, cols, act, stream_);
    float* dz = device_zeros(rows * cols);
    activation_backward(y, upload(dy), dz, rows * cols, act, stream_);
    std::vector<double> want_y(rows * cols), want_dz(rows * cols);
    for (std::int64_t i = 0; i < rows * cols; ++i) {
      const double v = double(z[i]) + bias[i % cols];
      double a = v, d = 1;
      if (act == Activation::relu) a = v > 0 ? v : 0, d = v > 0 ? 1 : 0;
      if (act == Activation::tanh) a = std::tanh(v), d = 1 - a * a;
      if (act == Activation::sigmoid) a = 1 / (1 + std::exp(-v)), d = a * (1 - a);
      want_y[i] = a;
      want_dz[i] = dy[i] * d;
    }
    EXPECT_LE(relative_error(download(y, rows * cols), want_y), 1e-6) << static_cast<int>(act);
    EXPECT_LE(relative_error(download(dz, rows * cols), want_dz), 1e-5) << static_cast<int>(act);
  }
}

TEST_F(GpuTest, ColumnSumsAreExactAndDeterministic) {
  REQUIRE_DEVICE();
  for (auto [rows, cols] :
       {std::pair<std::int64_t, std::int64_t>{8192, 1}, {1000, 300}, {1, 7}, {0, 5}}) {
    const auto x = random_vector(std::max<std::int64_t>(rows * cols, 1), 10);
    float* dx = upload(x);
    float* out1 = device_zeros(cols);
    float* out2 = device_zeros(cols);
    float* scratch = device_zeros(std::max<std::int64_t>(column_sums_scratch(rows, cols), 1));
    column_sums(dx, out1, rows, cols, scratch, stream_);
    column_sums(dx, out2, rows, cols, scratch, stream_);
    std::vector<double> want(cols, 0.0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) want[c] += x[r * cols + c];
    const auto got = download(out1, cols);
    for (std::int64_t c = 0; c < cols; ++c)
      EXPECT_NEAR(got[c], want[c], 1e-5 * std::max(1.0, std::sqrt(double(rows)))) << rows;
    EXPECT_EQ(got, download(out2, cols));
  }
}

// More chunks of 256 rows than a grid has block rows (65535): a 16,776,961-row column, of small
// integers so that every partial and the total are exact in float.
TEST_F(GpuTest, ColumnSumsOfMoreRowsThanTheGridHasBlockRows) {
  REQUIRE_DEVICE();
  const std::int64_t rows = std::int64_t{65535} * 256 + 1;
  std::vector<float> x(static_cast<std::size_t>(rows));
  std::int64_t want = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    x[static_cast<std::size_t>(r)] = static_cast<float>(r % 3 - 1);
    want += r % 3 - 1;
  }
  float* dx = upload(x);
  float* out = device_zeros(1);
  float* scratch = device_zeros(column_sums_scratch(rows, 1));
  column_sums(dx, out, rows, 1, scratch, stream_);
  EXPECT_EQ(download(out, 1)[0], static_cast<float>(want));
}

TEST_F(GpuTest, BinaryCrossentropyFromProbabilitiesAndLogits) {
  REQUIRE_DEVICE();
  const std::int64_t rows = 300, cols = 2;
  const float scale = 1.0f / 300;
  auto logits = random_vector(rows * cols, 11, -6, 6);
  auto probs = random_vector(rows * cols, 12, 0, 1);
  probs[0] = 0.0f;  // clipped: no gradient
  probs[1] = 1.0f;
  std::vector<float> target(rows * cols);
  for (std::size_t i = 0; i < target.size(); ++i) target[i] = static_cast<float>(i % 3 == 0);
  for (bool from_logits : {false, true}) {
    const auto& pred = from_logits ? logits : probs;
    float* loss = device_zeros(rows);
    float* grad = device_zeros(rows * cols);
    binary_crossentropy(upload(pred), upload(target), rows, cols, from_logits, 0.1f, scale, loss,
                        grad, stream_);
    std::vector<double> want_loss(rows, 0.0), want_grad(rows * cols);
    const double eps = 1e-7;
    for (std::int64_t i = 0; i < rows * cols; ++i) {
      const double t = target[i] * 0.9 + 0.05, x = pred[i];
      double l, g;
      if (from_logits) {
        const double s = 1 / (1 + std::exp(-x));
        l = -(t * std::log(s) + (1 - t) * std::log(1 - s));
        g = s - t;
      } else {
        const bool clipped = x < eps || x > 1 - eps;
        const double q = std::clamp(x, eps, 1 - eps);
        l = -(t * std::log(q + eps) + (1 - t) * std::log(1 - q + eps));
        g = clipped ? 0 : -t / (q + eps) + (1 - t) / (1 - q + eps);
      }
      want_loss[i / cols] += l / cols;
      want_grad[i] = g * scale / cols;
    }
    EXPECT_LE(relative_error(download(loss, rows), want_loss), 1e-5) << from_logits;
    const auto got_grad = download(grad, rows * cols);
    EXPECT_LE(relative_error(got_grad, want_grad), 1e-5) << from_logits;
    if (!from_logits) {
      EXPECT_EQ(got_grad[0], 0.0f);
    }
  }
}

TEST_F(GpuTest, SparseCategoricalCrossentropyAndAccuracy) {
  REQUIRE_DEVICE();
  const std::int64_t rows = 129, classes = 10;
  const float scale = 0.5f;
  const auto logits = random_vector(rows * classes, 13, -5, 5);
  auto probs = random_vector(rows * classes, 14, 0.01f, 1);
  std::vector<float> labels(rows);
  for (std::int64_t r = 0; r < rows; ++r) labels[r] = static_cast<float>((r * 7) % classes);
  for (bool from_logits : {false, true}) {
    const auto& pred = from_logits ? logits : probs;
    float* loss = device_zeros(rows);
    float* grad = device_zeros(rows * classes);
    float* dpred = upload(pred);
    float* dlabels = upload(labels);
    sparse_categorical_crossentropy(dpred, dlabels, rows, classes, from_logits, scale, loss, grad,
                                    stream_);
    float* acc = device_zeros(rows);
    sparse_categorical_accuracy(dpred, dlabels, rows, classes, acc, stream_);
    std::vector<double> want_loss(rows), want_grad(rows * classes), want_acc(rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* p = pred.data() + r * classes;
      const auto k = static_cast<std::int64_t>(labels[r]);
      want_acc[r] = (std::max_element(p, p + classes) - p) == k ? 1 : 0;
      if (from_logits) {
        double z = 0;
        for (std::int64_t c = 0; c < classes; ++c) z += std::exp(double(p[c]));
        want_loss[r] = std::log(z) - p[k];
        for (std::int64_t c = 0; c < classes; ++c)
          want_grad[r * classes + c] = (std::exp(double(p[c])) / z - (c == k)) * scale;
      } else {
        double s = 0;
        for (std::int64_t c = 0; c < classes; ++c) s += p[c];
        want_loss[r] = -std::log(p[k] / s);
        for (std::int64_t c = 0; c < classes; ++c)
          want_grad[r * classes + c] = (1 / s - (c == k ? 1 / double(p[k]) : 0)) * scale;
      }
    }
    EXPECT_LE(relative_error(download(loss, rows), want_loss), 1e-5) << from_logits;
    EXPECT_LE(relative_error(download(grad, rows * classes), want_grad), 1e-5) << from_logits;
    EXPECT_LE(relative_error(download(acc, rows), want_acc), 0.0) << from_logits;
  }
  // A label that is no class index makes its row NaN (the caller reports it as a data error).
  float* loss = device_zeros(1);
  sparse_categorical_crossentropy(upload(logits), upload({10.0f}), 1, classes, true, 1, loss,
                                  nullptr, stream_);
  EXPECT_TRUE(std::isnan(download(loss, 1)[0]));
}

TEST_F(GpuTest, SumIsDeterministicDouble) {
  REQUIRE_DEVICE();
  const auto x = random_vector(100003, 15);
  float* dx = upload(x);
  double* out = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&out), 2 * sizeof(double)), "cudaMalloc");
  sum(dx, static_cast<std::int64_t>(x.size()), out, stream_);
  sum(dx, static_cast<std::int64_t>(x.size()), out + 1, stream_);
  double got[2];
  check(cudaMemcpyAsync(got, out, sizeof got, cudaMemcpyDeviceToHost, stream_), "download");
  check(cudaStreamSynchronize(stream_), "sync");
  cudaFree(out);
  double want = 0;
  for (float v : x) want += v;
  EXPECT_NEAR(got[0], want, 1e-9 * x.size());
  EXPECT_EQ(got[0], got[1]);
}

TEST_F(GpuTest, AdamAndSgdEqualTheCpuArithmeticBitForBit) {
  REQUIRE_DEVICE();
  const std::int64_t n = 100000;
  auto w = random_vector(n, 16), g = random_vector(n, 17), m = random_vector(n, 18, -0.1f, 0.1f),
       v = random_vector(n, 19, 0, 0.01f);
  const float alpha = 0.001f * std::sqrt(1 - std::pow(0.999f, 3.0f)) / (1 - std::pow(0.9f, 3.0f));
  float *dw = upload(w), *dg = upload(g), *dm = upload(m), *dv = upload(v);
  adam_update(dw, dg, dm, dv, n, alpha, 0.9f, 0.999f, 1e-7f, stream_);
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-7f;
  for (std::int64_t k = 0; k < n; ++k) {  // the CPU backend's loop (optimizers.cpp)
    m[k] += (g[k] - m[k]) * (1.0f - b1);
    v[k] += (g[k] * g[k] - v[k]) * (1.0f - b2);
    w[k] -= (m[k] * alpha) / (std::sqrt(v[k]) + eps);
  }
  EXPECT_EQ(download(dw, n), w);
  EXPECT_EQ(download(dm, n), m);
  EXPECT_EQ(download(dv, n), v);

  for (bool nesterov : {false, true}) {
    auto w2 = random_vector(n, 20), m2 = random_vector(n, 21);
    float *dw2 = upload(w2), *dm2 = upload(m2);
    sgd_update(dw2, dg, dm2, n, 0.01f, 0.9f, nesterov, stream_);
    for (std::int64_t k = 0; k < n; ++k) {
      m2[k] = 0.9f * m2[k] - 0.01f * g[k];
      w2[k] += nesterov ? 0.9f * m2[k] - 0.01f * g[k] : m2[k];
    }
    EXPECT_EQ(download(dw2, n), w2) << nesterov;
    EXPECT_EQ(download(dm2, n), m2) << nesterov;
  }
}

TEST_F(GpuTest, AllocatorReusesBlocksAndNamesTheBatchWhenOutOfMemory) {
  REQUIRE_DEVICE();
  DeviceAllocator alloc(0);
  for (int step = 0; step < 3; ++step) {  // the same sizes every step: cudaMalloc in step 0 only
    DeviceBuffer a(alloc, 1000), b(alloc, 3'000'000), c(alloc, 17);
  }
  EXPECT_EQ(alloc.stats().device_mallocs, 3);
  EXPECT_EQ(alloc.stats().in_use_bytes, 0u);
  EXPECT_EQ(alloc.stats().cached_bytes, DeviceAllocator::size_class(4000) +
                                            DeviceAllocator::size_class(12'000'000) +
                                            DeviceAllocator::size_class(68));
  alloc.set_context("a batch of 8192 samples per replica");
  try {
    alloc.allocate(std::size_t{1} << 50);  // a pebibyte
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const RunError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUDA out of memory on cuda:0"), std::string::npos) << what;
    EXPECT_NE(what.find("a batch of 8192 samples per replica"), std::string::npos) << what;
    EXPECT_NE(what.find("Lower batch_size"), std::string::npos) << what;
  }
  // The cache was handed back to the driver before giving up; the allocator still works.
  EXPECT_EQ(alloc.stats().cached_bytes, 0u);
  DeviceBuffer after(alloc, 10);
  EXPECT_NE(after.data(), nullptr);
}

TEST(CudaCheck, ErrorsAreSentences) {
  // No device needed: the formatting of errors.
  try {
    check(cudaErrorInvalidValue, "cudaMemcpy");
    FAIL();
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA cudaMemcpy failed: invalid argument (error 1)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(std::size_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(DeviceAllocator::size_class(1), 512u);
  EXPECT_EQ(DeviceAllocator::size_class(std::size_t{1} << 20), std::size_t{1} << 20);
  EXPECT_EQ(DeviceAllocator::size_class((std::size_t{1} << 20) + 1), std::size_t{2} << 20);
}

}  // namespace
}  // namespace tandem::cuda
