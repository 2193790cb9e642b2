// CpuBackend::dense_products: in float32, the default (one gemm() per product); in bfloat16, each
// operand rounded once per product that reads it, into the layout oneDNN's matmul reads fastest.
//
// A Dense step in bfloat16 takes three products: the forward x · kernel, the kernel gradient
// xᵀ · dy and the input gradient dy · kernelᵀ. gemm() would round both operands of each, in
// plain layouts, and oneDNN's AMX matmul then copies its weights operand into its tile layout
// inside the call. Here (measured on seed-mlp at batch 2048 on an AMX Xeon, docs/benchmarks.md):
// - the forward sums at most kMaxSliceInputs inputs per product, x's slice rounded row-major and
//   the kernel's rounded straight into the packed layout (round_and_pack): two halves of
//   2048 x 8000 x 4000 take 92 ms where the whole took 110 on the kernel stored transposed;
// - the kernel gradient reads xᵀ rounded row-major and dy packed: 70 ms against 148 for the plain
//   operands;
// - the input gradient reads dy rounded row-major and the kernel packed: 18 against 33 ms for
//   2048 x 2000 x 4000.
// The packed operands are rounded straight into AMX's layout where oneDNN picked it: dy as it is,
// the kernel from its transpose (4000 x 2000: 2.2 against 5.1 ms for rounding, then oneDNN's
// transposing reorder). Rounding is element-wise and packing moves bits, so the results are the
// products of the rounded operands summed in float32, to the order oneDNN sums them in (and,
// past kMaxSliceInputs inputs, slice after slice).
//
// Memory: nothing is kept between calls but the primitives; the rounded operands go to one set of
// buffers per thread, sized to the largest operands seen (seed-mlp at batch 2048: about 105 MB),
// as gemm() has its own.
#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/bf16_buffer.hpp"
#include "backend/cpu/bf16_rounding.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/packed_bf16_matmul.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

namespace {

// The forward's products take at most this many inputs each: oneDNN's AMX matmul runs a long
// sum more slowly than two halves (2048 x 8000 x 4000: 110 ms, two products of k = 4000 on packed
// kernels 92 ms).
constexpr std::int64_t kMaxSliceInputs = 4096;

// One slice of the forward's sum: inputs [begin, end).
struct Slice {
  std::int64_t begin, end;
};

// The three products of a batch of `rows`, planned for the calling thread's team; each is made
// when first needed (the first layer of a model never takes an input gradient).
struct Plans {
  std::vector<std::unique_ptr<cpu::PackedBf16Matmul>> forward;  // x · kernel, slice by slice
  std::unique_ptr<cpu::PackedBf16Matmul> kernel_gradient;       // xᵀ · dy
  std::unique_ptr<cpu::PackedBf16Matmul> input_gradient;        // dy · kernelᵀ
};

// The rounded operands of one product at a time: one set per thread, shared by every layer.
struct Scratch {
  cpu::Bf16Buffer a;       // x's slices, or xᵀ
  cpu::Bf16Buffer b;       // the kernel's slices, dy or kernelᵀ, packed
  cpu::Bf16Buffer dy;      // dy, row-major
};

Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

using cpu::Bf16Layout;
using cpu::Bf16MatmulDesc;
using cpu::Bf16Operand;

class Bf16DenseProducts final : public DenseProducts {
 public:
  Bf16DenseProducts(Backend& ops, const DenseProductDesc& desc)
      : ops_(ops), desc_(desc), slices_(slices_of(desc.in)) {}

  void forward(const Tensor& x, const Tensor& kernel, const Tensor* bias, Tensor& y) override {
    const std::int64_t rows = rows_of("forward", x);
    require("forward", "kernel", kernel, desc_.in * desc_.units);
    require("forward", "output", y, rows * desc_.units);
    const bool with_bias = desc_.epilogue != GemmEpilogue::none;
    if (with_bias) {
      if (!bias) throw std::logic_error("backend operation dense forward: no bias given");
      require("forward", "bias", *bias, desc_.units);
    }
    if (rows == 0) return;  // an empty shard
    std::vector<std::unique_ptr<cpu::PackedBf16Matmul>>& products = plans_for(rows).forward;
    std::int64_t kernel_values = 0;
    for (std::size_t i = 0; i < slices_.size(); ++i) {
      const Slice& slice = slices_[i];
      if (products.size() == i)  // the first slice adds the bias, the others what it summed
        products.push_back(std::make_unique<cpu::PackedBf16Matmul>(
            Bf16MatmulDesc{rows, desc_.units, slice.end - slice.begin, Bf16Layout::row_major,
                           Bf16Layout::packed, with_bias && i == 0, i > 0}));
      kernel_values += products[i]->values(Bf16Operand::b);
    }
    Scratch& scratch = thread_scratch();
    std::uint16_t* x_low = scratch.a.grown_to(x.size());
    std::uint16_t* kernel_packed = scratch.b.grown_to(kernel_values);
    for (std::size_t i = 0; i < slices_.size(); ++i) {
      const Slice& slice = slices_[i];
      cpu::round_columns_to_bf16(x.data(), rows, desc_.in, slice.begin, slice.end, x_low);
      products[i]->round_and_pack(Bf16Operand::b, kernel.data() + slice.begin * desc_.units, false,
                                  kernel_packed);
      products[i]->run(x_low, kernel_packed, i == 0 && with_bias ? bias->data() : nullptr,
                       y.data());
      x_low += rows * (slice.end - slice.begin);
      kernel_packed += products[i]->values(Bf16Operand::b);
    }
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
    if (rows == 0) {  // an empty shard: an empty sum
      if (d_kernel) d_kernel->fill(0.0f);
      return;
    }
    Scratch& scratch = thread_scratch();
    Plans& plans = plans_for(rows);
    if (d_kernel) {
      cpu::PackedBf16Matmul& product =
          plan(plans.kernel_gradient,
               {desc_.in, desc_.units, rows, Bf16Layout::row_major, Bf16Layout::packed});
      std::uint16_t* x_low_transposed = scratch.a.grown_to(x.size());
      cpu::round_to_bf16_transposed(x.data(), rows, desc_.in, x_low_transposed);
      std::uint16_t* dy_packed = scratch.b.grown_to(product.values(Bf16Operand::b));
      product.round_and_pack(Bf16Operand::b, dy.data(), false, dy_packed);
      product.run(x_low_transposed, dy_packed, nullptr, d_kernel->data());
    }
    if (dx) {
      cpu::PackedBf16Matmul& product =
          plan(plans.input_gradient,
               {rows, desc_.in, desc_.units, Bf16Layout::row_major, Bf16Layout::packed});
      std::uint16_t* dy_low = scratch.dy.grown_to(dy.size());
      cpu::round_to_bf16(dy.data(), dy.size(), dy_low);
      std::uint16_t* kernel_packed = scratch.b.grown_to(product.values(Bf16Operand::b));
      product.round_and_pack(Bf16Operand::b, kernel.data(), true, kernel_packed);  // kernelᵀ
      product.run(dy_low, kernel_packed, nullptr, dx->data());
    }
  }

 private:
  // [0, in) cut into the fewest slices of at most kMaxSliceInputs, all but the last of one size,
  // a multiple of 32 (the AMX blocks' rows).
  static std::vector<Slice> slices_of(std::int64_t in) {
    const std::int64_t count =
        std::max<std::int64_t>(1, (in + kMaxSliceInputs - 1) / kMaxSliceInputs);
    const std::int64_t size = count == 1 ? in : ((in + count - 1) / count + 31) / 32 * 32;
    std::vector<Slice> slices;
    for (std::int64_t begin = 0; begin < in || slices.empty(); begin += size)
      slices.push_back({begin, std::min(in, begin + size)});
    return slices;
  }

  // The plans for a batch of `rows` on the calling thread's team.
  Plans& plans_for(std::int64_t rows) { return plans_[{rows, cpu::compute_threads()}]; }

  // `slot`'s product, made on first use.
  static cpu::PackedBf16Matmul& plan(std::unique_ptr<cpu::PackedBf16Matmul>& slot,
                                     const Bf16MatmulDesc& desc) {
    if (!slot) slot = std::make_unique<cpu::PackedBf16Matmul>(desc);
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

  Backend& ops_;
  DenseProductDesc desc_;
  std::vector<Slice> slices_;                            // of the forward's sum
  std::map<std::pair<std::int64_t, int>, Plans> plans_;  // by rows and team size
};

}  // namespace

std::unique_ptr<DenseProducts> CpuBackend::dense_products(const DenseProductDesc& desc) {
  if (!bf16_products_) return Backend::dense_products(desc);
  return std::make_unique<Bf16DenseProducts>(*this, desc);
}

}  // namespace tandem::backend
