#include "backend/cpu/packed_bf16_matmul.hpp"

#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "backend/cpu/bf16_buffer.hpp"
#include "backend/cpu/bf16_rounding.hpp"
#include "backend/cpu/dnnl_engine.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/parallel.hpp"
#include "tandem/error.hpp"

namespace tandem::cpu {

using dnnl::memory;

struct PackedBf16Matmul::State {
  Bf16MatmulDesc d;
  int threads;  // the team the primitives were planned for
  bool single;  // run on one thread (a small product)
  dnnl::stream stream{dnnl_engine()};
  memory::desc a_md, b_md;
  // Per operand (a, b): whether oneDNN picked AMX's BA16a64b2a, which Tandem's rounding writes
  // straight (round_and_pack).
  bool amx_blocked[2] = {false, false};
  dnnl::matmul primitive;
  memory a, b, c, bias;
  std::map<std::pair<Bf16Operand, bool>, dnnl::reorder> packers;  // by operand and transposed
  Bf16Buffer rounded;  // round_and_pack's plain rounding, when the layout needs a reorder

  const memory::desc& desc_of(Bf16Operand which) const {
    return which == Bf16Operand::a ? a_md : b_md;
  }
  std::int64_t rows_of(Bf16Operand which) const { return which == Bf16Operand::a ? d.m : d.k; }
  std::int64_t cols_of(Bf16Operand which) const { return which == Bf16Operand::a ? d.k : d.n; }
  std::string shape() const {
    return "m=" + std::to_string(d.m) + " n=" + std::to_string(d.n) + " k=" + std::to_string(d.k) +
           " batch=" + std::to_string(d.batch);
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

// The primitive's attributes: C's old values added (a sum post-op) when accumulating.
dnnl::primitive_attr attributes(const Bf16MatmulDesc& d) {
  dnnl::primitive_attr attr;
  if (d.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

}  // namespace

PackedBf16Matmul::PackedBf16Matmul(const Bf16MatmulDesc& d) : state_(std::make_unique<State>()) {
  if (d.with_bias && d.batch != 1) throw std::logic_error("a batched bf16 matmul takes no bias");
  State& s = *state_;
  s.d = d;
  s.threads = compute_threads();
  const double flops = 2.0 * static_cast<double>(d.batch) * static_cast<double>(d.m) *
                       static_cast<double>(d.n) * static_cast<double>(d.k);
  s.single = flops < kParallelGemmFlops && s.threads > 1;
  const OneThread one_thread(s.single ? s.threads : 0);
  using T = memory::data_type;
  try {
    const memory::desc c_md = dnnl_matrix_desc(d.batch, d.m, d.n, false, T::f32);
    const memory::desc bias_md =
        d.with_bias ? memory::desc({1, d.n}, T::f32, memory::format_tag::ab) : memory::desc();
    const memory::desc a_any = operand_desc(d.batch, d.m, d.k, d.a),
                       b_any = operand_desc(d.batch, d.k, d.n, d.b);
    const dnnl::matmul::primitive_desc pd(d.with_bias
                                              ? dnnl::matmul::desc(a_any, b_any, bias_md, c_md)
                                              : dnnl::matmul::desc(a_any, b_any, c_md),
                                          attributes(d), dnnl_engine());
    s.a_md = pd.src_desc();
    s.b_md = pd.weights_desc();
    for (const Bf16Operand which : {Bf16Operand::a, Bf16Operand::b})
      s.amx_blocked[static_cast<int>(which)] =
          d.batch == 1 && s.desc_of(which) == memory::desc({s.rows_of(which), s.cols_of(which)},
                                                           T::bf16, memory::format_tag::BA16a64b2a);
    s.primitive = dnnl::matmul(pd);
    s.a = dnnl_user_memory(s.a_md, nullptr);
    s.b = dnnl_user_memory(s.b_md, nullptr);
    s.c = dnnl_user_memory(c_md, nullptr);
    if (d.with_bias) s.bias = dnnl_user_memory(bias_md, nullptr);
  } catch (const dnnl::error& e) {
    throw RunError("oneDNN bf16 matmul cannot be planned for " + s.shape() + ": " + e.what());
  }
}

PackedBf16Matmul::~PackedBf16Matmul() = default;

std::int64_t PackedBf16Matmul::values(Bf16Operand which) const {
  return static_cast<std::int64_t>(state_->desc_of(which).get_size() / sizeof(std::uint16_t));
}

void PackedBf16Matmul::pack(Bf16Operand which, const std::uint16_t* from, bool transposed,
                            std::uint16_t* to) {
  State& s = *state_;
  const OneThread one_thread(s.single ? s.threads : 0);
  const memory::desc from_md = dnnl_matrix_desc(s.d.batch, s.rows_of(which), s.cols_of(which),
                                                transposed, memory::data_type::bf16);
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
    throw RunError("oneDNN cannot pack operand " +
                   std::string(which == Bf16Operand::a ? "A" : "B") + " of the bf16 matmul " +
                   s.shape() + ": " + e.what());
  }
}

void PackedBf16Matmul::round_and_pack(Bf16Operand which, const float* from, bool transposed,
                                      std::uint16_t* to) {
  State& s = *state_;
  const std::int64_t rows = s.rows_of(which), cols = s.cols_of(which);
  if (s.amx_blocked[static_cast<int>(which)]) {
    const OneThread one_thread(s.single ? s.threads : 0);
    round_to_bf16_ba16a64b2a(from, rows, cols, transposed, to);
    return;
  }
  std::uint16_t* rounded = s.rounded.grown_to(s.d.batch * rows * cols);
  round_to_bf16(from, s.d.batch * rows * cols, rounded);
  pack(which, rounded, transposed, to);
}

void PackedBf16Matmul::run(const std::uint16_t* a, const std::uint16_t* b, const float* bias,
                           float* c) {
  State& s = *state_;
  if ((bias != nullptr) != s.d.with_bias)
    throw std::logic_error("bf16 matmul " + s.shape() + " was planned " +
                           (s.d.with_bias ? "with" : "without") + " a bias");
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
