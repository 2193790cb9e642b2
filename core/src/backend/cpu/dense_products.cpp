// CpuBackend::dense_products: in float32, the default (one gemm() per product); in bfloat16, the
// operands rounded once each and kept between the calls that read them.
//
// A Dense step in bfloat16 reads x twice (the forward, the kernel gradient), the kernel twice
// (the forward, the input gradient) and dy twice (both gradients). gemm() would round each operand
// at every product: on seed-mlp at batch 2048 that rounding was a fifth of the step. Here the
// forward rounds x and the kernel and keeps them for the backward, which rounds dy once for both
// gradients. The kernel is kept transposed (units x in): oneDNN's AMX and AVX-512 BF16 matmuls
// read a weights operand stored that way faster, in the forward (Keras' in x units, seen as
// transposed) and in the input gradient (kernelᵀ, then plain row-major), as PyTorch's Linear
// (weights out x in) has them. Rounding is element-wise, so the results are the bits gemm() of
// the same operands gives, to the order oneDNN sums them in.
//
// Memory: each layer keeps its rounded x and kernel (2 bytes a value) until it is destroyed,
// where gemm() rounds into one buffer per thread sized to the largest operands; dy goes to one
// buffer per thread. For seed-mlp at batch 2048 that is 158 MB kept against 97 MB (2.3 GB peak).
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm.hpp"

namespace tandem::backend {

namespace {

// Where a kept rounding came from: the tensor's storage and size when it was rounded.
struct RoundedFrom {
  const float* data = nullptr;
  std::int64_t size = -1;
  bool same(const Tensor& t) const { return t.data() == data && t.size() == size; }
};

class Bf16DenseProducts final : public DenseProducts {
 public:
  Bf16DenseProducts(Backend& ops, const DenseProductDesc& desc) : ops_(ops), desc_(desc) {}

  void forward(const Tensor& x, const Tensor& kernel, const Tensor* bias, Tensor& y) override {
    const std::int64_t rows = rows_of("forward", x);
    require("forward", "kernel", kernel, desc_.in * desc_.units);
    require("forward", "output", y, rows * desc_.units);
    const bool with_bias = desc_.epilogue != GemmEpilogue::none;
    if (with_bias) {
      if (!bias) throw std::logic_error("backend operation dense forward: no bias given");
      require("forward", "bias", *bias, desc_.units);
    }
    round_input(x);
    round_kernel(kernel);
    cpu::matmul_bf16(false, true, rows, desc_.units, desc_.in, 1, x_low_.data(), kernel_low_.data(),
                     with_bias ? bias->data() : nullptr, y.data());
    if (desc_.epilogue == GemmEpilogue::relu_bias)
      ops_.activation_forward(ActivationKind::relu, y, y, desc_.units);
  }

  void backward(const Tensor& x, const Tensor& dy, const Tensor& kernel, Tensor* d_kernel,
                Tensor* dx) override {
    const std::int64_t rows = rows_of("backward", x);
    require("backward", "kernel", kernel, desc_.in * desc_.units);
    require("backward", "output gradient", dy, rows * desc_.units);
    if (d_kernel) require("backward", "kernel gradient", *d_kernel, desc_.in * desc_.units);
    if (dx) require("backward", "input gradient", *dx, rows * desc_.in);
    thread_local std::vector<std::uint16_t> dy_buffer;  // one per thread, shared by every layer
    std::uint16_t* dy_low = cpu::grown_to(dy_buffer, dy.size());
    cpu::round_to_bf16(dy.data(), dy.size(), dy_low);
    if (d_kernel) {
      if (!x_from_.same(x)) round_input(x);
      cpu::matmul_bf16(true, false, desc_.in, desc_.units, rows, 1, x_low_.data(), dy_low, nullptr,
                       d_kernel->data());
    }
    if (dx) {
      if (!kernel_from_.same(kernel)) round_kernel(kernel);
      cpu::matmul_bf16(false, false, rows, desc_.in, desc_.units, 1, dy_low, kernel_low_.data(),
                       nullptr, dx->data());
    }
  }

 private:
  // The rows of x (its size over `in`), on this backend's device; throws std::logic_error
  // naming the operation otherwise.
  std::int64_t rows_of(const char* what, const Tensor& x) const {
    if (desc_.in <= 0 || x.size() % desc_.in != 0)
      throw std::logic_error(std::string("backend operation dense ") + what + ": input " +
                             shape_to_string(x.shape()) + " is not rows of " +
                             std::to_string(desc_.in) + " values");
    require(what, "input", x, x.size());
    return x.size() / desc_.in;
  }

  // Throws std::logic_error unless t is on this backend's device and holds `size` values.
  void require(const char* what, const char* name, const Tensor& t, std::int64_t size) const {
    require_device(ops_, t, what);
    if (t.size() != size)
      throw std::logic_error(std::string("backend operation dense ") + what + ": the " + name +
                             " holds " + std::to_string(t.size()) + " values, not " +
                             std::to_string(size) + " (" + std::to_string(desc_.in) + " -> " +
                             std::to_string(desc_.units) + ")");
  }

  void round_input(const Tensor& x) {
    x_low_.resize(static_cast<std::size_t>(x.size()));
    cpu::round_to_bf16(x.data(), x.size(), x_low_.data());
    x_from_ = {x.data(), x.size()};
  }

  void round_kernel(const Tensor& kernel) {
    kernel_low_.resize(static_cast<std::size_t>(kernel.size()));
    cpu::round_to_bf16_transposed(kernel.data(), desc_.in, desc_.units, kernel_low_.data());
    kernel_from_ = {kernel.data(), kernel.size()};
  }

  Backend& ops_;
  DenseProductDesc desc_;
  std::vector<std::uint16_t> x_low_;       // the last forward's x, rounded
  std::vector<std::uint16_t> kernel_low_;  // the last forward's kernel, rounded, units x in
  RoundedFrom x_from_, kernel_from_;
};

}  // namespace

std::unique_ptr<DenseProducts> CpuBackend::dense_products(const DenseProductDesc& desc) {
  if (!bf16_products_) return Backend::dense_products(desc);
  return std::make_unique<Bf16DenseProducts>(*this, desc);
}

}  // namespace tandem::backend
