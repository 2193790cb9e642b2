// The CPU backend's 2-D and 3-D convolutions: oneDNN convolution primitives (forward,
// backward-data, backward-weights with bias).
//
// Activations stay NHWC, the Keras layout, with no reorder; the kernel is handed to oneDNN in the
// layout it prefers (format_tag::any), reordered from/to Keras' HWIO once per step. Measured on the
// fashion-cnn shapes (batch 128, two AVX-512 cores): NHWC + HWIO runs im2col+GEMM (conv2 3x3
// 32->64 on 13x13: forward 3.3-5.7 ms, backward 5.3 ms); everything `any` runs blocked nChw16c
// kernels behind activation reorders (1.7 + 2.9 ms); NHWC activations with `any` weights run
// brgconv forward (1.2 + 2.9 ms), the fastest overall. (convolution_auto picks Winograd for some
// shapes: faster on conv2's forward, 7x slower on conv1's, and less exact: not used.)
//
// A tensor of exactly 16 channels is handed to oneDNN as nChw16c, its blocked layout: for 16
// channels that is NHWC's very bytes (one block of 16), and oneDNN's blocked kernels beat its NHWC
// ones (fashion-resnet's 16-filter 3x3 convolutions, forward + both backwards, 35 steps: 1,267 ms
// in NHWC, 1,110 ms so on an AVX-512 Xeon). Where oneDNN has only its reference kernel for that
// combination, the primitives are made again in NHWC. In float32 only: oneDNN 2.6's AMX kernels
// take bfloat16 activations in NHWC, and for nChw16c it runs AVX-512 BF16 ones (fashion-resnet in
// bf16 on an AMX Xeon: 1,085-1,132 samples/s blocked, 1,400-1,420 NHWC; not measured on CPUs
// with AVX-512 BF16 and no AMX).
//
// Primitives are created per (batch size, thread count) on first use and cached; the scratchpad
// and reordered weights are owned by the operation, so a steady-state step allocates nothing.
//
// In bfloat16 (the bf16 CPU backend) the kernel's reorder also rounds it to bfloat16, the input
// and the output gradient are rounded value by value (cpu/bf16_rounding.hpp; oneDNN's reorder
// took 12.8 ms of a 91 ms fashion-resnet step) into buffers of the operation, and the
// primitives write float32 (output, gradients): bf16 products, float32 sums. A convolution over
// fewer than kMinBf16Channels input channels per group (an image model's first layer, a
// depthwise one) stays in float32: it does a few products per value, so rounding its output
// gradient costs more than bfloat16 saves (fashion-cnn's 1-channel conv1 backward: 0.72 ms in
// float32, 0.51 ms rounding + 0.46 ms in bfloat16).
#include <map>
#include <string>
#include <unordered_map>

#include "backend/cpu/bf16_rounding.hpp"
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
constexpr auto kBf16 = memory::data_type::bf16;
constexpr std::int64_t kMinBf16Channels = 8;  // per group; see the header comment
using Args = std::unordered_map<int, memory>;

// `to` = `from` rounded to bfloat16 value by value: the two describe one layout, in float32 and
// in bfloat16 (cpu/bf16_rounding.hpp's loop, the bits the matmuls' operands get; oneDNN 2.6's
// reorder took twice as long here). Its instruction would read a subnormal input as zero, which
// bf16_bits rounds; none comes here from the compute threads, which flush them (parallel.cpp).
void round_into(const memory& from, const memory& to) {
  const auto n = static_cast<std::int64_t>(from.get_desc().get_size() / sizeof(float));
  cpu::round_to_bf16(static_cast<const float*>(from.get_data_handle()), n,
                     static_cast<std::uint16_t*>(to.get_data_handle()));
}

// Everything oneDNN needs for one batch size. The memories wrap the caller's tensors (their
// data handles are set before each execution); `weights`, `diff_weights` and `data_weights` are
// oneDNN-owned buffers in the primitives' preferred kernel layout, used only when that layout is
// not Keras' HWIO.
struct Primitives {
  std::int64_t batch = 0;
  dnnl::stream stream;
  memory::desc src_md, dst_md, kernel_md, weights_any_md, bias_md;
  // What the primitives read: src_md / dst_md themselves in float32; their bfloat16 twins, with
  // `src_low` and `diff_dst_low` holding the rounded values, in bfloat16.
  memory::desc src_low_md, diff_dst_low_md;
  memory src_low, diff_dst_low;
  bool src_low_from_forward = false;  // src_low holds the last forward's rounded input
  memory::dims strides, dilates, pad_l, pad_r;

  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  memory src, dst, kernel, bias, weights, fwd_scratch;
  bool reorder_weights = false;
  dnnl::reorder weights_reorder;  // kernel (HWIO) -> weights
  Args fwd_args, weights_reorder_args;

  bool have_bwd_weights = false;
  dnnl::convolution_backward_weights bwd_weights;
  memory diff_dst, diff_kernel, diff_bias, diff_weights, bwdw_scratch;
  bool reorder_diff_weights = false;
  dnnl::reorder diff_weights_reorder;  // diff_weights -> diff_kernel (HWIO)
  Args bwdw_args, diff_weights_reorder_args;

  bool have_bwd_data = false;
  dnnl::convolution_backward_data bwd_data;
  memory diff_src, data_weights, bwdd_scratch;
  bool reorder_data_weights = false;  // needs its own reorder of the kernel
  dnnl::reorder data_weights_reorder;
  Args bwdd_args, data_weights_reorder_args;
};

class CpuConvolution final : public Convolution2D {
 public:
  CpuConvolution(ConvolutionDesc desc, bool bf16)
      : desc_(std::move(desc)),
        bf16_(bf16 && desc_.geometry.channels / desc_.groups >= kMinBf16Channels),
        blocked_16_(!bf16_ && !desc_.geometry.volume && desc_.groups == 1 &&
                    desc_.geometry.rows.dilation == 1 && desc_.geometry.cols.dilation == 1) {}

  void forward(const Tensor& x, const Tensor& kernel, const Tensor* bias, Tensor& y) override {
    const window::Geometry& g = desc_.geometry;
    const std::int64_t batch = x.rank() > 0 ? x.dim(0) : 0;
    cpu_backend().place(y, window_output_shape(g, batch, desc_.filters));
    if (batch == 0) return;
    Primitives& p = primitives(batch);
    try {
      p.src.set_data_handle(const_cast<float*>(x.data()));
      p.dst.set_data_handle(y.data());
      p.kernel.set_data_handle(const_cast<float*>(kernel.data()));
      if (desc_.use_bias) p.bias.set_data_handle(const_cast<float*>(bias->data()));
      p.fwd_scratch.set_data_handle(scratch_.data());
      if (p.reorder_weights) p.weights_reorder.execute(p.stream, p.weights_reorder_args);
      if (bf16_) round_into(p.src, p.src_low);
      p.src_low_from_forward = true;
      p.fwd.execute(p.stream, p.fwd_args);
      p.stream.wait();
    } catch (const dnnl::error& e) {
      fail("forward convolution", batch, e);
    }
  }

  void backward_weights(const Tensor& x, const Tensor& dy, Tensor& d_kernel,
                        Tensor* d_bias) override {
    const std::int64_t batch = x.rank() > 0 ? x.dim(0) : 0;
    if (batch == 0) {  // no samples: zero gradients
      d_kernel.fill(0.0f);
      if (d_bias) d_bias->fill(0.0f);
      return;
    }
    Primitives& p = primitives(batch);
    prepare_backward(p, false);
    try {
      bind_weight_gradients(p, x, dy, d_kernel, d_bias);
      if (bf16_) {  // x may not be the last forward's: src_low then no longer holds that
        round_into(p.src, p.src_low);
        p.src_low_from_forward = false;
        round_into(p.diff_dst, p.diff_dst_low);
      }
      p.bwd_weights.execute(p.stream, p.bwdw_args);
      if (p.reorder_diff_weights)
        p.diff_weights_reorder.execute(p.stream, p.diff_weights_reorder_args);
      p.stream.wait();
    } catch (const dnnl::error& e) {
      fail("backward convolution (weights)", batch, e);
    }
  }

  // Rounds dy once for both gradients and, in bfloat16, reuses the forward's rounded input.
  void backward(const Tensor& x, const Tensor& dy, const Tensor& kernel, Tensor& d_kernel,
                Tensor* d_bias, Tensor* dx) override {
    const std::int64_t batch = x.rank() > 0 ? x.dim(0) : 0;
    if (batch == 0 || !bf16_) return Convolution2D::backward(x, dy, kernel, d_kernel, d_bias, dx);
    const window::Geometry& g = desc_.geometry;
    if (dx) cpu_backend().place(*dx, window_input_shape(g, batch));
    Primitives& p = primitives(batch);
    prepare_backward(p, dx != nullptr);
    try {
      bind_weight_gradients(p, x, dy, d_kernel, d_bias);
      if (!p.src_low_from_forward) round_into(p.src, p.src_low);
      round_into(p.diff_dst, p.diff_dst_low);
      p.bwd_weights.execute(p.stream, p.bwdw_args);
      if (p.reorder_diff_weights)
        p.diff_weights_reorder.execute(p.stream, p.diff_weights_reorder_args);
      if (dx) {  // its primitive exists only when asked for (a first layer has no dx)
        p.bwdd_scratch.set_data_handle(scratch_.data());
        p.diff_src.set_data_handle(dx->data());
        p.kernel.set_data_handle(const_cast<float*>(kernel.data()));
        if (p.reorder_data_weights)
          p.data_weights_reorder.execute(p.stream, p.data_weights_reorder_args);
        p.bwd_data.execute(p.stream, p.bwdd_args);
      }
      p.stream.wait();
    } catch (const dnnl::error& e) {
      fail("backward convolution", batch, e);
    }
  }

  void backward_data(const Tensor& dy, const Tensor& kernel, Tensor& dx) override {
    const window::Geometry& g = desc_.geometry;
    const std::int64_t batch = dy.rank() > 0 ? dy.dim(0) : 0;
    cpu_backend().place(dx, window_input_shape(g, batch));
    if (batch == 0) return;
    Primitives& p = primitives(batch);
    prepare_backward(p, true);
    try {
      p.diff_dst.set_data_handle(const_cast<float*>(dy.data()));
      p.diff_src.set_data_handle(dx.data());
      p.kernel.set_data_handle(const_cast<float*>(kernel.data()));
      p.bwdd_scratch.set_data_handle(scratch_.data());
      if (p.reorder_data_weights)
        p.data_weights_reorder.execute(p.stream, p.data_weights_reorder_args);
      if (bf16_) round_into(p.diff_dst, p.diff_dst_low);
      p.bwd_data.execute(p.stream, p.bwdd_args);
      p.stream.wait();
    } catch (const dnnl::error& e) {
      fail("backward convolution (data)", batch, e);
    }
  }

 private:
  Primitives& primitives(std::int64_t batch);
  void prepare_backward(Primitives& p, bool need_data);
  // The output gradient's user memory and, in bfloat16, its rounded twin and their reorder.
  void ensure_diff_dst(Primitives& p);
  // Points the backward-weights memories at the caller's x, dy, d_kernel and d_bias.
  void bind_weight_gradients(Primitives& p, const Tensor& x, const Tensor& dy, Tensor& d_kernel,
                             Tensor* d_bias) {
    p.src.set_data_handle(const_cast<float*>(x.data()));
    p.diff_dst.set_data_handle(const_cast<float*>(dy.data()));
    p.diff_kernel.set_data_handle(d_kernel.data());
    if (desc_.use_bias) p.diff_bias.set_data_handle(d_bias->data());
    p.bwdw_scratch.set_data_handle(scratch_.data());
  }
  [[noreturn]] void fail(const char* what, std::int64_t batch, const std::exception& e) const {
    const window::Geometry& g = desc_.geometry;
    throw RunError(desc_.label + ": oneDNN " + what + " failed for input " +
                   shape_to_string(window_input_shape(g, batch)) + ": " + e.what());
  }

  // How oneDNN is told the layout of a channels-last tensor of `channels` channels (see the
  // header).
  Tag activation_tag(std::int64_t channels) const {
    if (desc_.geometry.volume) return Tag::ndhwc;
    return blocked_16_ && channels == 16 ? Tag::nChw16c : Tag::nhwc;
  }

  ConvolutionDesc desc_;
  bool bf16_;        // operands rounded to bfloat16
  bool blocked_16_;  // 16-channel tensors described as nChw16c (see the header)
  Tensor scratch_;  // oneDNN scratchpad, shared by all primitives
  std::map<std::pair<std::int64_t, int>, std::unique_ptr<Primitives>> cache_;
};

Primitives& CpuConvolution::primitives(std::int64_t batch) {
  const int threads = cpu::compute_threads();  // oneDNN plans its work for this team size
  const auto key = std::make_pair(batch, threads);
  if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  auto p = std::make_unique<Primitives>();
  p->batch = batch;
  try {
    const auto& engine = cpu::dnnl_engine();
    const backend::window::Geometry& g = desc_.geometry;
    const std::int64_t in = g.channels, filters = desc_.filters;
    p->stream = dnnl::stream(engine);
    // oneDNN's logical dims are always (N, C, [D,] H, W) / (O, I, [D,] H, W); the tags give the
    // layouts.
    const auto low = bf16_ ? kBf16 : kF32;  // the operands' type
    const Tag src_tag = activation_tag(in), dst_tag = activation_tag(filters);
    const memory::dims src_dims = cpu::dnnl_cells({batch, in}, g, true);
    const memory::dims dst_dims = cpu::dnnl_cells({batch, filters}, g, false);
    p->src_md = memory::desc(src_dims, kF32, src_tag);
    p->dst_md = memory::desc(dst_dims, kF32, dst_tag);
    p->src_low_md = memory::desc(src_dims, low, src_tag);
    p->diff_dst_low_md = memory::desc(dst_dims, low, dst_tag);
    if (desc_.groups == 1) {
      const memory::dims dims = cpu::dnnl_taps({filters, in}, g);
      p->kernel_md = memory::desc(dims, kF32, g.volume ? Tag::dhwio : Tag::hwio);
      p->weights_any_md = memory::desc(dims, low, Tag::any);
    } else {  // (G, O/G, I/G, [D,] H, W); Keras' ([kd,] kh, kw, I/G, O) is [d]hwigo
      const memory::dims dims =
          cpu::dnnl_taps({desc_.groups, filters / desc_.groups, in / desc_.groups}, g);
      p->kernel_md = memory::desc(dims, kF32, g.volume ? Tag::dhwigo : Tag::hwigo);
      p->weights_any_md = memory::desc(dims, low, Tag::any);
    }
    if (desc_.use_bias) p->bias_md = memory::desc({filters}, kF32, Tag::a);
    const cpu::DnnlWindow w = cpu::dnnl_window(g);
    p->strides = w.strides;
    p->dilates = w.dilates;
    p->pad_l = w.pad_l;
    p->pad_r = w.pad_r;

    auto desc =
        desc_.use_bias
            ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                              dnnl::algorithm::convolution_direct, p->src_low_md,
                                              p->weights_any_md, p->bias_md, p->dst_md, p->strides,
                                              p->dilates, p->pad_l, p->pad_r)
            : dnnl::convolution_forward::desc(
                  dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                  p->src_low_md, p->weights_any_md, p->dst_md, p->strides, p->dilates, p->pad_l,
                  p->pad_r);
    // relu is not a oneDNN post-op here: oneDNN 2.6's fused relu turns NaN into 0, and a NaN
    // must survive relu (Tandem's NaN policy; tests/core/nn/conv2d_test.cpp checks it).
    p->fwd_pd =
        dnnl::convolution_forward::primitive_desc(desc, cpu::dnnl_user_scratchpad(), engine);
    if (src_tag != Tag::nhwc || dst_tag != Tag::nhwc) {
      const std::string kernel = p->fwd_pd.impl_info_str();
      if (kernel.rfind("ref", 0) == 0) {  // no fast blocked kernel for this one: NHWC
        blocked_16_ = false;
        return primitives(batch);
      }
    }
    p->fwd = dnnl::convolution_forward(p->fwd_pd);
    p->src = cpu::dnnl_user_memory(p->src_md, nullptr);
    p->dst = cpu::dnnl_user_memory(p->dst_md, nullptr);
    if (bf16_) {
      p->src_low = memory(p->src_low_md, engine);
    } else {
      p->src_low = p->src;
    }
    p->kernel = cpu::dnnl_user_memory(p->kernel_md, nullptr);
    p->reorder_weights = p->fwd_pd.weights_desc() != p->kernel_md;
    if (p->reorder_weights) {
      p->weights = memory(p->fwd_pd.weights_desc(), engine);
      p->weights_reorder = dnnl::reorder(p->kernel, p->weights);
      p->weights_reorder_args = {{DNNL_ARG_FROM, p->kernel}, {DNNL_ARG_TO, p->weights}};
    } else {
      p->weights = p->kernel;
    }
    p->fwd_scratch = cpu::dnnl_user_memory(p->fwd_pd.scratchpad_desc(), nullptr);
    p->fwd_args = {{DNNL_ARG_SRC, p->src_low},
                   {DNNL_ARG_WEIGHTS, p->weights},
                   {DNNL_ARG_DST, p->dst},
                   {DNNL_ARG_SCRATCHPAD, p->fwd_scratch}};
    if (desc_.use_bias) {
      p->bias = cpu::dnnl_user_memory(p->bias_md, nullptr);
      p->fwd_args.emplace(DNNL_ARG_BIAS, p->bias);
    }
    const auto scratch_floats =
        static_cast<std::int64_t>(p->fwd_pd.scratchpad_desc().get_size() / sizeof(float) + 1);
    if (scratch_.size() < scratch_floats) scratch_ = Tensor({scratch_floats});
  } catch (const dnnl::error& e) {
    fail("set-up of the forward convolution", batch, e);
  }
  return *cache_.emplace(key, std::move(p)).first->second;
}

void CpuConvolution::ensure_diff_dst(Primitives& p) {
  if (p.diff_dst) return;
  p.diff_dst = cpu::dnnl_user_memory(p.dst_md, nullptr);
  if (bf16_) {
    p.diff_dst_low = memory(p.diff_dst_low_md, cpu::dnnl_engine());
  } else {
    p.diff_dst_low = p.diff_dst;
  }
}

void CpuConvolution::prepare_backward(Primitives& p, bool need_data) {
  const auto& engine = cpu::dnnl_engine();
  try {
    ensure_diff_dst(p);
    if (!p.have_bwd_weights) {
      // The kernel's gradient is a float32 sum, whatever the operands.
      const memory::desc diff_weights_any_md(p.weights_any_md.dims(), kF32, Tag::any);
      auto desc = desc_.use_bias
                      ? dnnl::convolution_backward_weights::desc(
                            dnnl::algorithm::convolution_direct, p.src_low_md,
                            diff_weights_any_md, p.bias_md, p.diff_dst_low_md, p.strides,
                            p.dilates, p.pad_l, p.pad_r)
                      : dnnl::convolution_backward_weights::desc(
                            dnnl::algorithm::convolution_direct, p.src_low_md,
                            diff_weights_any_md, p.diff_dst_low_md, p.strides, p.dilates,
                            p.pad_l, p.pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(desc, cpu::dnnl_user_scratchpad(),
                                                            engine, p.fwd_pd);
      p.bwd_weights = dnnl::convolution_backward_weights(pd);
      ensure_diff_dst(p);
      p.diff_kernel = cpu::dnnl_user_memory(p.kernel_md, nullptr);
      p.reorder_diff_weights = pd.diff_weights_desc() != p.kernel_md;
      if (p.reorder_diff_weights) {
        p.diff_weights = memory(pd.diff_weights_desc(), engine);
        p.diff_weights_reorder = dnnl::reorder(p.diff_weights, p.diff_kernel);
        p.diff_weights_reorder_args = {{DNNL_ARG_FROM, p.diff_weights},
                                       {DNNL_ARG_TO, p.diff_kernel}};
      } else {
        p.diff_weights = p.diff_kernel;
      }
      p.bwdw_scratch = cpu::dnnl_user_memory(pd.scratchpad_desc(), nullptr);
      p.bwdw_args = {{DNNL_ARG_SRC, p.src_low},
                     {DNNL_ARG_DIFF_DST, p.diff_dst_low},
                     {DNNL_ARG_DIFF_WEIGHTS, p.diff_weights},
                     {DNNL_ARG_SCRATCHPAD, p.bwdw_scratch}};
      if (desc_.use_bias) {
        p.diff_bias = cpu::dnnl_user_memory(p.bias_md, nullptr);
        p.bwdw_args.emplace(DNNL_ARG_DIFF_BIAS, p.diff_bias);
      }
      const auto floats =
          static_cast<std::int64_t>(pd.scratchpad_desc().get_size() / sizeof(float) + 1);
      if (scratch_.size() < floats) scratch_ = Tensor({floats});
      p.have_bwd_weights = true;
    }
    if (need_data && !p.have_bwd_data) {
      dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, p.src_md,
                                                 p.weights_any_md, p.diff_dst_low_md, p.strides,
                                                 p.dilates, p.pad_l, p.pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(desc, cpu::dnnl_user_scratchpad(), engine,
                                                         p.fwd_pd);
      p.bwd_data = dnnl::convolution_backward_data(pd);
      p.diff_src = cpu::dnnl_user_memory(p.src_md, nullptr);
      // The forward's layout of the kernel serves when backward-data wants the same one; it is
      // reordered again there, since a Conv2DTranspose runs backward-data without a forward.
      if (pd.weights_desc() == p.weights.get_desc()) {
        p.data_weights = p.weights;
        p.reorder_data_weights = p.reorder_weights;
        p.data_weights_reorder = p.weights_reorder;
        p.data_weights_reorder_args = p.weights_reorder_args;
      } else if (pd.weights_desc() == p.kernel_md) {
        p.data_weights = p.kernel;
      } else {
        p.reorder_data_weights = true;
        p.data_weights = memory(pd.weights_desc(), engine);
        p.data_weights_reorder = dnnl::reorder(p.kernel, p.data_weights);
        p.data_weights_reorder_args = {{DNNL_ARG_FROM, p.kernel}, {DNNL_ARG_TO, p.data_weights}};
      }
      p.bwdd_scratch = cpu::dnnl_user_memory(pd.scratchpad_desc(), nullptr);
      p.bwdd_args = {{DNNL_ARG_DIFF_DST, p.diff_dst_low},
                     {DNNL_ARG_WEIGHTS, p.data_weights},
                     {DNNL_ARG_DIFF_SRC, p.diff_src},
                     {DNNL_ARG_SCRATCHPAD, p.bwdd_scratch}};
      const auto floats =
          static_cast<std::int64_t>(pd.scratchpad_desc().get_size() / sizeof(float) + 1);
      if (scratch_.size() < floats) scratch_ = Tensor({floats});
      p.have_bwd_data = true;
    }
  } catch (const dnnl::error& e) {
    fail("set-up of the backward convolution", p.batch, e);
  }
}

}  // namespace

std::unique_ptr<Convolution2D> CpuBackend::convolution(const ConvolutionDesc& desc) {
  return std::make_unique<CpuConvolution>(desc, bf16_products_);
}

}  // namespace tandem::backend
