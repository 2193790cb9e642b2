// CpuBackend::dense_products: in float32, the default (one gemm() per product); in bfloat16, each
// operand rounded once per product that reads it, into the layout oneDNN's matmul reads fastest.
//
// A Dense step in bfloat16 takes three products: the forward x · kernel, the kernel gradient
// xᵀ · dy and the input gradient dy · kernelᵀ. gemm() would round both operands of each, in
// plain layouts, and oneDNN's AMX matmul then copies its weights operand into its tile layout
// inside the call. Here (measured on seed-mlp at batch 2048, docs/benchmarks.md):
// - the forward reads x rounded, row-major, and the kernel rounded and kept transposed
//   (units x in, as PyTorch's Linear stores it), which its matmul reads faster than a packed one
//   (118 against 108 ms for 2048 x 8000 x 4000);
// - the kernel gradient reads xᵀ rounded row-major and dy packed (oneDNN's blocked layout for
//   the product): 70 ms against 148 for the plain operands;
// - the input gradient reads dy rounded and the kept kernel packed: 18 against 33 ms for
//   2048 x 2000 x 4000.
// dy is rounded once for both gradients. Rounding is element-wise and packing moves bits, so the
// results are the bits gemm() of the same operands gives, to the order oneDNN sums them in.
//
// Memory: each layer keeps its rounded kernel (2 bytes a weight: 82 MB for seed-mlp) until it is
// destroyed; the other operands go to one set of buffers per thread, sized to the largest
// operands seen (seed-mlp at batch 2048: 160 MB), as gemm() has its own.
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "backend/cpu/bf16_buffer.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/packed_bf16_matmul.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

namespace {

// Where the kept kernel rounding came from: the tensor's storage and size when it was rounded.
struct RoundedFrom {
  const float* data = nullptr;
  std::int64_t size = -1;
  bool same(const Tensor& t) const { return t.data() == data && t.size() == size; }
};

// The three products of a batch of `rows`, planned for the calling thread's team; each is made
// when first needed (the first layer of a model never takes an input gradient).
struct Plans {
  std::unique_ptr<cpu::PackedBf16Matmul> forward;          // x · kernel
  std::unique_ptr<cpu::PackedBf16Matmul> kernel_gradient;  // xᵀ · dy
  std::unique_ptr<cpu::PackedBf16Matmul> input_gradient;   // dy · kernelᵀ
};

// The rounded operands of one product at a time: one set per thread, shared by every layer.
struct Scratch {
  cpu::Bf16Buffer a;   // x, or xᵀ
  cpu::Bf16Buffer b;   // dy or kernelᵀ, packed
  cpu::Bf16Buffer dy;  // dy, row-major
};

Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

using cpu::Bf16Layout;
using cpu::Bf16Operand;

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
    std::uint16_t* x_low = thread_scratch().a.grown_to(x.size());
    cpu::round_to_bf16(x.data(), x.size(), x_low);
    round_kernel(kernel);
    cpu::PackedBf16Matmul& product = plan(plans_for(rows).forward, rows, desc_.units, desc_.in,
                                          Bf16Layout::row_major, Bf16Layout::transposed, with_bias);
    product.run(x_low, kernel_low_.data(), with_bias ? bias->data() : nullptr, y.data());
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
    Scratch& scratch = thread_scratch();
    std::uint16_t* dy_low = scratch.dy.grown_to(dy.size());
    cpu::round_to_bf16(dy.data(), dy.size(), dy_low);
    Plans& plans = plans_for(rows);
    if (d_kernel) {
      cpu::PackedBf16Matmul& product = plan(plans.kernel_gradient, desc_.in, desc_.units, rows,
                                            Bf16Layout::row_major, Bf16Layout::packed, false);
      std::uint16_t* x_low_transposed = scratch.a.grown_to(x.size());
      cpu::round_to_bf16_transposed(x.data(), rows, desc_.in, x_low_transposed);
      std::uint16_t* dy_packed = scratch.b.grown_to(product.values(Bf16Operand::b));
      product.pack(Bf16Operand::b, dy_low, false, dy_packed);
      product.run(x_low_transposed, dy_packed, nullptr, d_kernel->data());
    }
    if (dx) {
      if (!kernel_from_.same(kernel)) round_kernel(kernel);
      cpu::PackedBf16Matmul& product = plan(plans.input_gradient, rows, desc_.in, desc_.units,
                                            Bf16Layout::row_major, Bf16Layout::packed, false);
      std::uint16_t* kernel_packed = scratch.b.grown_to(product.values(Bf16Operand::b));
      product.pack(Bf16Operand::b, kernel_low_.data(), false, kernel_packed);  // kernelᵀ
      product.run(dy_low, kernel_packed, nullptr, dx->data());
    }
  }

 private:
  // The plans for a batch of `rows` on the calling thread's team.
  Plans& plans_for(std::int64_t rows) { return plans_[{rows, cpu::compute_threads()}]; }

  // `slot`'s product m x n x k with A and B in the given layouts, made on first use.
  static cpu::PackedBf16Matmul& plan(std::unique_ptr<cpu::PackedBf16Matmul>& slot, std::int64_t m,
                                     std::int64_t n, std::int64_t k, Bf16Layout a, Bf16Layout b,
                                     bool with_bias) {
    if (!slot) slot = std::make_unique<cpu::PackedBf16Matmul>(m, n, k, a, b, with_bias);
    return *slot;
  }

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

  void round_kernel(const Tensor& kernel) {
    cpu::round_to_bf16_transposed(kernel.data(), desc_.in, desc_.units,
                                  kernel_low_.grown_to(kernel.size()));
    kernel_from_ = {kernel.data(), kernel.size()};
  }

  Backend& ops_;
  DenseProductDesc desc_;
  cpu::Bf16Buffer kernel_low_;  // the last rounded kernel, transposed (units x in)
  RoundedFrom kernel_from_;
  std::map<std::pair<std::int64_t, int>, Plans> plans_;  // by rows and team size
};

}  // namespace

std::unique_ptr<DenseProducts> CpuBackend::dense_products(const DenseProductDesc& desc) {
  if (!bf16_products_) return Backend::dense_products(desc);
  return std::make_unique<Bf16DenseProducts>(*this, desc);
}

}  // namespace tandem::backend
