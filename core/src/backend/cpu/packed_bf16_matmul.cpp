#include "backend/cpu/packed_bf16_matmul.hpp"

#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "backend/cpu/dnnl_engine.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/parallel.hpp"
#include "tandem/error.hpp"

namespace tandem::cpu {

using dnnl::memory;

struct PackedBf16Matmul::State {
  std::int64_t m, n, k, batch;
  int threads;  // the team the primitives were planned for
  bool single;  // run on one thread (a small product)
  bool with_bias;
  dnnl::stream stream{dnnl_engine()};
  memory::desc a_md, b_md;
  dnnl::matmul primitive;
  memory a, b, c, bias;
  std::map<std::pair<Bf16Operand, bool>, dnnl::reorder> packers;  // by operand and transposed

  const memory::desc& desc_of(Bf16Operand which) const {
    return which == Bf16Operand::a ? a_md : b_md;
  }
  std::string shape() const {
    return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " batch=" + std::to_string(batch);
  }
};

namespace {

memory::desc operand_desc(std::int64_t batch, std::int64_t rows, std::int64_t cols,
                          Bf16Layout layout) {
  if (layout == Bf16Layout::packed)
    return memory::desc(batch == 1 ? memory::dims{rows, cols} : memory::dims{batch, rows, cols},
                        memory::data_type::bf16, memory::format_tag::any);
  return dnnl_matrix_desc(batch, rows, cols, layout == Bf16Layout::transposed,
                          memory::data_type::bf16);
}

}  // namespace

PackedBf16Matmul::PackedBf16Matmul(std::int64_t m, std::int64_t n, std::int64_t k, Bf16Layout a,
                                   Bf16Layout b, bool with_bias, std::int64_t batch)
    : state_(std::make_unique<State>()) {
  if (with_bias && batch != 1) throw std::logic_error("a batched bf16 matmul takes no bias");
  State& s = *state_;
  s.m = m;
  s.n = n;
  s.k = k;
  s.batch = batch;
  s.threads = compute_threads();
  s.with_bias = with_bias;
  const double flops = 2.0 * static_cast<double>(batch) * static_cast<double>(m) *
                       static_cast<double>(n) * static_cast<double>(k);
  s.single = flops < kParallelGemmFlops && s.threads > 1;
  const OneThread one_thread(s.single ? s.threads : 0);
  using T = memory::data_type;
  try {
    const memory::desc c_md = dnnl_matrix_desc(batch, m, n, false, T::f32);
    const memory::desc bias_md =
        with_bias ? memory::desc({1, n}, T::f32, memory::format_tag::ab) : memory::desc();
    const memory::desc a_any = operand_desc(batch, m, k, a), b_any = operand_desc(batch, k, n, b);
    const dnnl::matmul::primitive_desc pd(with_bias
                                              ? dnnl::matmul::desc(a_any, b_any, bias_md, c_md)
                                              : dnnl::matmul::desc(a_any, b_any, c_md),
                                          dnnl_engine());
    s.a_md = pd.src_desc();
    s.b_md = pd.weights_desc();
    s.primitive = dnnl::matmul(pd);
    s.a = dnnl_user_memory(s.a_md, nullptr);
    s.b = dnnl_user_memory(s.b_md, nullptr);
    s.c = dnnl_user_memory(c_md, nullptr);
    if (with_bias) s.bias = dnnl_user_memory(bias_md, nullptr);
  } catch (const dnnl::error& e) {
    throw RunError("oneDNN bf16 matmul cannot be planned for " + s.shape() + ": " + e.what());
  }
}

PackedBf16Matmul::~PackedBf16Matmul() = default;

std::int64_t PackedBf16Matmul::values(Bf16Operand which) const {
  return static_cast<std::int64_t>(state_->desc_of(which).get_size() / sizeof(std::uint16_t));
}

bool PackedBf16Matmul::same_layout(Bf16Operand which, const PackedBf16Matmul& other) const {
  return state_->desc_of(which) == other.state_->desc_of(which);
}

void PackedBf16Matmul::pack(Bf16Operand which, const std::uint16_t* from, bool transposed,
                            std::uint16_t* to) {
  State& s = *state_;
  const OneThread one_thread(s.single ? s.threads : 0);
  const bool is_a = which == Bf16Operand::a;
  const std::int64_t rows = is_a ? s.m : s.k, cols = is_a ? s.k : s.n;
  const memory::desc from_md =
      dnnl_matrix_desc(s.batch, rows, cols, transposed, memory::data_type::bf16);
  try {
    auto it = s.packers.find({which, transposed});
    if (it == s.packers.end())
      it = s.packers
               .emplace(std::pair{which, transposed},
                        dnnl::reorder(dnnl::reorder::primitive_desc(
                            dnnl_engine(), from_md, dnnl_engine(), s.desc_of(which))))
               .first;
    memory src = dnnl_user_memory(from_md, const_cast<std::uint16_t*>(from));
    memory dst = dnnl_user_memory(s.desc_of(which), to);
    it->second.execute(s.stream, src, dst);
    s.stream.wait();
  } catch (const dnnl::error& e) {
    throw RunError("oneDNN cannot pack operand " + std::string(is_a ? "A" : "B") +
                   " of the bf16 matmul " + s.shape() + ": " + e.what());
  }
}

void PackedBf16Matmul::run(const std::uint16_t* a, const std::uint16_t* b, const float* bias,
                           float* c) {
  State& s = *state_;
  if ((bias != nullptr) != s.with_bias)
    throw std::logic_error("bf16 matmul " + s.shape() + " was planned " +
                           (s.with_bias ? "with" : "without") + " a bias");
  const OneThread one_thread(s.single ? s.threads : 0);
  try {
    s.a.set_data_handle(const_cast<std::uint16_t*>(a));
    s.b.set_data_handle(const_cast<std::uint16_t*>(b));
    s.c.set_data_handle(c);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, s.a}, {DNNL_ARG_WEIGHTS, s.b}, {DNNL_ARG_DST, s.c}};
    if (bias) {
      s.bias.set_data_handle(const_cast<float*>(bias));
      args.emplace(DNNL_ARG_BIAS, s.bias);
    }
    s.primitive.execute(s.stream, args);
    s.stream.wait();
  } catch (const dnnl::error& e) {
    throw RunError("oneDNN bf16 matmul failed for " + s.shape() + ": " + e.what());
  }
}

}  // namespace tandem::cpu
