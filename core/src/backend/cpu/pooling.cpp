// The CPU backend's 2-D and 3-D pooling: oneDNN pooling primitives in NHWC (NDHWC)
// (jit:avx512_core; measured faster than nChw16c for the fashion-cnn shapes), created per (batch
// size, thread count) and cached; max pooling keeps the forward's argmax workspace for its
// backward. Padded cells never win a maximum and are left out of an average
// (pooling_avg_exclude_padding, Keras' rule).
#include <map>
#include <unordered_map>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/dnnl_engine.hpp"
#include "backend/cpu/dnnl_window.hpp"
#include "backend/cpu/parallel.hpp"
#include "tandem/error.hpp"

namespace tandem::backend {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;
using Args = std::unordered_map<int, memory>;

// The forward and backward primitives of one batch size; src/dst/diff memories wrap the caller's
// tensors (handles set before each execution), the workspace (max pooling's argmax) is oneDNN's.
struct Primitives {
  dnnl::stream stream;
  dnnl::pooling_forward::primitive_desc fwd_pd;
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
  memory src, dst, diff_src, diff_dst, workspace, fwd_scratch, bwd_scratch;
  Args fwd_args, bwd_args;
};

class CpuPooling final : public Pooling2D {
 public:
  explicit CpuPooling(PoolingDesc desc) : desc_(std::move(desc)) {}

  void forward(const Tensor& x, Tensor& y) override {
    const window::Geometry& g = desc_.geometry;
    const std::int64_t batch = x.rank() > 0 ? x.dim(0) : 0;
    last_batch_ = batch;
    cpu_backend().place(y, window_output_shape(g, batch, g.channels));
    if (batch == 0) return;
    Primitives& p = primitives(batch);
    try {
      p.src.set_data_handle(const_cast<float*>(x.data()));
      p.dst.set_data_handle(y.data());
      p.fwd_scratch.set_data_handle(scratch_.data());
      p.fwd.execute(p.stream, p.fwd_args);
      p.stream.wait();
    } catch (const dnnl::error& e) {
      fail("forward pooling", batch, e);
    }
  }

  void backward(const Tensor& dy, Tensor& dx) override {
    const window::Geometry& g = desc_.geometry;
    const std::int64_t batch = last_batch_;
    cpu_backend().place(dx, window_input_shape(g, batch));
    if (batch <= 0) return;
    Primitives& p = primitives(batch);
    try {
      p.diff_dst.set_data_handle(const_cast<float*>(dy.data()));
      p.diff_src.set_data_handle(dx.data());
      p.bwd_scratch.set_data_handle(scratch_.data());
      p.bwd.execute(p.stream, p.bwd_args);
      p.stream.wait();
    } catch (const dnnl::error& e) {
      fail("backward pooling", batch, e);
    }
  }

 private:
  Primitives& primitives(std::int64_t batch);
  [[noreturn]] void fail(const char* what, std::int64_t batch, const std::exception& e) const {
    const window::Geometry& g = desc_.geometry;
    throw RunError(desc_.label + ": oneDNN " + what + " failed for input " +
                   shape_to_string(window_input_shape(g, batch)) + ": " + e.what());
  }

  PoolingDesc desc_;
  std::int64_t last_batch_ = -1;  // the batch size of the last forward (-1: none yet)
  Tensor scratch_;                // oneDNN scratchpad, shared by all primitives
  std::map<std::pair<std::int64_t, int>, std::unique_ptr<Primitives>> cache_;
};

Primitives& CpuPooling::primitives(std::int64_t batch) {
  const int threads = cpu::compute_threads();  // oneDNN plans its work for this team size
  const auto key = std::make_pair(batch, threads);
  if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  auto p = std::make_unique<Primitives>();
  try {
    const auto& engine = cpu::dnnl_engine();
    const window::Geometry& g = desc_.geometry;
    const std::int64_t channels = g.channels;
    const Tag tag = g.volume ? Tag::ndhwc : Tag::nhwc;
    memory::desc src_md(cpu::dnnl_cells({batch, channels}, g, true), kF32, tag);
    memory::desc dst_md(cpu::dnnl_cells({batch, channels}, g, false), kF32, tag);
    const cpu::DnnlWindow w = cpu::dnnl_window(g);
    const memory::dims& strides = w.strides;
    const memory::dims kernel = cpu::dnnl_taps({}, g);
    const memory::dims& pad_l = w.pad_l;
    const memory::dims& pad_r = w.pad_r;
    const auto algorithm = desc_.kind == PoolKind::max
                               ? dnnl::algorithm::pooling_max
                               : dnnl::algorithm::pooling_avg_exclude_padding;
    const dnnl::primitive_attr attr = cpu::dnnl_user_scratchpad();
    p->stream = dnnl::stream(engine);
    // forward_training even at inference: max pooling then always leaves the workspace its
    // backward needs (writing it costs next to nothing).
    p->fwd_pd = dnnl::pooling_forward::primitive_desc(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, algorithm, src_md, dst_md,
                                    strides, kernel, pad_l, pad_r),
        attr, engine);
    p->fwd = dnnl::pooling_forward(p->fwd_pd);
    dnnl::pooling_backward::primitive_desc bwd_pd(
        dnnl::pooling_backward::desc(algorithm, src_md, dst_md, strides, kernel, pad_l, pad_r),
        attr, engine, p->fwd_pd);
    p->bwd = dnnl::pooling_backward(bwd_pd);
    p->src = cpu::dnnl_user_memory(src_md, nullptr);
    p->dst = cpu::dnnl_user_memory(dst_md, nullptr);
    p->diff_src = cpu::dnnl_user_memory(src_md, nullptr);
    p->diff_dst = cpu::dnnl_user_memory(dst_md, nullptr);
    p->fwd_scratch = cpu::dnnl_user_memory(p->fwd_pd.scratchpad_desc(), nullptr);
    p->bwd_scratch = cpu::dnnl_user_memory(bwd_pd.scratchpad_desc(), nullptr);
    p->fwd_args = {
        {DNNL_ARG_SRC, p->src}, {DNNL_ARG_DST, p->dst}, {DNNL_ARG_SCRATCHPAD, p->fwd_scratch}};
    p->bwd_args = {{DNNL_ARG_DIFF_DST, p->diff_dst},
                   {DNNL_ARG_DIFF_SRC, p->diff_src},
                   {DNNL_ARG_SCRATCHPAD, p->bwd_scratch}};
    if (p->fwd_pd.workspace_desc().get_size() > 0) {
      p->workspace = memory(p->fwd_pd.workspace_desc(), engine);
      p->fwd_args.emplace(DNNL_ARG_WORKSPACE, p->workspace);
      p->bwd_args.emplace(DNNL_ARG_WORKSPACE, p->workspace);
    }
    const std::size_t bytes =
        std::max(p->fwd_pd.scratchpad_desc().get_size(), bwd_pd.scratchpad_desc().get_size());
    const auto floats = static_cast<std::int64_t>(bytes / sizeof(float) + 1);
    if (scratch_.size() < floats) scratch_ = Tensor({floats});
  } catch (const dnnl::error& e) {
    fail("pooling set-up", batch, e);
  }
  return *cache_.emplace(key, std::move(p)).first->second;
}

}  // namespace

std::unique_ptr<Pooling2D> CpuBackend::pooling(const PoolingDesc& desc) {
  return std::make_unique<CpuPooling>(desc);
}

}  // namespace tandem::backend
