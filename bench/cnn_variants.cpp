// cnn_variants: the convolutional part of one fashion-cnn training step (batch 128: conv2d,
// relu, max_pooling2d, conv2d_1, relu, max_pooling2d_1, forward and backward) built directly
// from oneDNN primitives, as Tandem's Conv2D and Pooling2D run it today and in two
// rearrangements the engine could adopt. It measures what those would save; see
// docs/benchmarks.md (fashion-cnn, "Where the time goes", F9 and F10). It does not change the
// engine.
//
//   V0  as the engine runs it: NHWC everywhere, relu as a separate pass over each convolution's
//       output (activation_forward), relu backward over the full convolution output
//       (activation_backward) after the pooling backward.
//   V1  relu fused into the convolution (oneDNN eltwise post-op), and relu's backward applied
//       to the pooled gradient instead (max pooling commutes with relu, so masking the pooled
//       gradient with pooled output > 0 gives the same gradient), on a tensor 4-5x smaller.
//   V2  V1, and the first convolution (1 input channel) and its pooling in oneDNN's blocked
//       nChw16c layout, with reorders of the pooled tensor and of its gradient to/from NHWC.
//
// The three variants run interleaved, one chain each per round, so a disturbance hits all
// alike; medians over the rounds. Each piece ends with stream.wait(), as in the layers.
// Usage: cnn_variants [rounds (default 200)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/parallel.hpp"
#include "backend/ops.hpp"
#include "nn/activation_fn.hpp"
#include "util/process_setup.hpp"

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Clock = std::chrono::steady_clock;
using tandem::nn::ActivationKind;
constexpr auto kF32 = memory::data_type::f32;
constexpr memory::dim N = 128;

const dnnl::engine& eng() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& strm() {
  static dnnl::stream s(eng());
  return s;
}

memory filled(const memory::desc& d, float scale = 1.f, float offset = 0.f) {
  memory m(d, eng());
  float* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < d.get_size() / sizeof(float); ++i)
    p[i] = scale * (static_cast<float>((i * 2654435761u) % 1000) / 1000.0f + offset);
  return m;
}
float* data(const memory& m) {
  return static_cast<float*>(m.get_data_handle());
}

// A 3x3 valid convolution with bias, with its kernel kept in Keras' HWIO and reordered into the
// primitives' layouts every step, as Conv2D does.
struct Conv {
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_weights bwd_w;
  dnnl::convolution_backward_data bwd_d;
  dnnl::reorder to_w, to_w_data, from_dw;
  memory kernel, w, w_data, dw, dkernel, bias, dbias;
  std::string impl;
  Conv(memory::dim ic, memory::dim oc, const memory::desc& src, const memory::desc& dst,
       bool relu_post_op, bool need_data) {
    const memory::desc any({oc, ic, 3, 3}, kF32, Tag::any), hwio({oc, ic, 3, 3}, kF32, Tag::hwio);
    const memory::desc b({oc}, kF32, Tag::a);
    const memory::dims s{1, 1}, d{0, 0}, p{0, 0};
    dnnl::primitive_attr attr;
    if (relu_post_op) {
      dnnl::post_ops po;
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      attr.set_post_ops(po);
    }
    const auto alg = dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, alg, src, any, b, dst, s, d, p, p}, attr, eng());
    dnnl::convolution_backward_weights::primitive_desc wpd({alg, src, any, b, dst, s, d, p, p},
                                                           eng(), fpd);
    fwd = dnnl::convolution_forward(fpd);
    bwd_w = dnnl::convolution_backward_weights(wpd);
    kernel = filled(hwio, 0.2f, -0.5f);
    w = memory(fpd.weights_desc(), eng());
    to_w = dnnl::reorder(kernel, w);
    dw = memory(wpd.diff_weights_desc(), eng());
    dkernel = memory(hwio, eng());
    from_dw = dnnl::reorder(dw, dkernel);
    bias = filled(b, 0.f);
    dbias = memory(b, eng());
    impl = std::string("fwd ") + fpd.impl_info_str() + ", bwd_w " + wpd.impl_info_str();
    if (need_data) {
      dnnl::convolution_backward_data::primitive_desc dpd({alg, src, any, dst, s, d, p, p}, eng(),
                                                          fpd);
      bwd_d = dnnl::convolution_backward_data(dpd);
      w_data = memory(dpd.weights_desc(), eng());
      to_w_data = dnnl::reorder(kernel, w_data);
      impl += std::string(", bwd_d ") + dpd.impl_info_str();
    }
  }
};

struct Pool {  // 2x2 max pooling, stride 2
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
  memory ws;
  Pool(const memory::desc& src, const memory::desc& dst) {
    const auto alg = dnnl::algorithm::pooling_max;
    dnnl::pooling_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, alg, src, dst, {2, 2}, {2, 2}, {0, 0}, {0, 0}}, eng());
    dnnl::pooling_backward::primitive_desc bpd({alg, src, dst, {2, 2}, {2, 2}, {0, 0}, {0, 0}},
                                               eng(), fpd);
    fwd = dnnl::pooling_forward(fpd);
    bwd = dnnl::pooling_backward(bpd);
    ws = memory(fpd.workspace_desc(), eng());
  }
};

struct Variant {
  int v;
  static memory::desc x_md(int v) {  // one channel: NCHW and NHWC are the same bytes
    return memory::desc({N, 1, 28, 28}, kF32, v == 2 ? Tag::nchw : Tag::nhwc);
  }
  static Tag first(int v) { return v == 2 ? Tag::nChw16c : Tag::nhwc; }
  memory::desc c1_md, p1_md, p1n_md, c2_md, p2_md;
  Conv conv1, conv2;
  Pool pool1, pool2;
  memory x, c1, p1, p1n, c2, p2, gp2, gp2m, gc2, gc2r, gp1n, gp1nm, gp1, gc1, gc1r;
  dnnl::reorder p1_to_nhwc, gp1_to_blocked;
  std::map<std::string, std::vector<double>> t;
  std::vector<double> total;

  explicit Variant(int variant)
      : v(variant),
        c1_md({N, 32, 26, 26}, kF32, first(variant)),
        p1_md({N, 32, 13, 13}, kF32, first(variant)),
        p1n_md({N, 32, 13, 13}, kF32, Tag::nhwc),
        c2_md({N, 64, 11, 11}, kF32, Tag::nhwc),
        p2_md({N, 64, 5, 5}, kF32, Tag::nhwc),
        conv1(1, 32, x_md(variant), c1_md, variant > 0, false),
        conv2(32, 64, p1n_md, c2_md, variant > 0, true),
        pool1(c1_md, p1_md),
        pool2(c2_md, p2_md) {
    x = filled(x_md(v));
    c1 = memory(c1_md, eng());
    p1 = memory(p1_md, eng());
    p1n = v == 2 ? memory(p1n_md, eng()) : p1;
    c2 = memory(c2_md, eng());
    p2 = memory(p2_md, eng());
    gp2 = filled(p2_md, 0.01f, -0.5f);
    gp2m = memory(p2_md, eng());
    gc2 = memory(c2_md, eng());
    gc2r = memory(c2_md, eng());
    gp1n = memory(p1n_md, eng());
    gp1nm = memory(p1n_md, eng());
    gp1 = v == 2 ? memory(p1_md, eng()) : gp1nm;
    gc1 = memory(c1_md, eng());
    gc1r = memory(c1_md, eng());
    if (v == 2) {
      p1_to_nhwc = dnnl::reorder(p1, p1n);
      gp1_to_blocked = dnnl::reorder(gp1nm, gp1);
    }
  }

  void step(bool record) {
    auto& st = strm();
    auto t0 = Clock::now(), last = t0;
    auto mark = [&](const char* name) {
      st.wait();
      const auto now = Clock::now();
      if (record) t[name].push_back(std::chrono::duration<double, std::milli>(now - last).count());
      last = now;
    };
    // The engine's relu (the CPU backend's) over oneDNN's buffers, borrowed as tensors.
    auto borrowed = [](memory& m, memory::dim n) {
      return tandem::Tensor::adopt({n}, std::shared_ptr<float[]>(data(m), [](float*) {}));
    };
    auto relu_fwd = [&](memory& m, memory::dim n) {
      tandem::Tensor t = borrowed(m, n);
      tandem::backend::cpu_backend().activation_forward(ActivationKind::relu, t, t, 32);
    };
    auto relu_bwd = [&](memory& y, memory& g, memory& gi, memory::dim n) {
      tandem::Tensor yt = borrowed(y, n), gt = borrowed(g, n), git = borrowed(gi, n);
      tandem::backend::cpu_backend().activation_backward(ActivationKind::relu, yt, yt, gt, git,
                                                         32);
    };
    // forward
    conv1.to_w.execute(st, conv1.kernel, conv1.w);
    conv1.fwd.execute(st, {{DNNL_ARG_SRC, x},
                           {DNNL_ARG_WEIGHTS, conv1.w},
                           {DNNL_ARG_BIAS, conv1.bias},
                           {DNNL_ARG_DST, c1}});
    mark("01 conv2d forward");
    if (v == 0) {
      relu_fwd(c1, N * 26 * 26 * 32);
      mark("02 relu forward (26x26x32)");
    }
    pool1.fwd.execute(st, {{DNNL_ARG_SRC, c1}, {DNNL_ARG_DST, p1}, {DNNL_ARG_WORKSPACE, pool1.ws}});
    mark("03 max_pooling2d forward");
    if (v == 2) {
      p1_to_nhwc.execute(st, p1, p1n);
      mark("04 reorder pooled nChw16c->nhwc");
    }
    conv2.to_w.execute(st, conv2.kernel, conv2.w);
    conv2.fwd.execute(st, {{DNNL_ARG_SRC, p1n},
                           {DNNL_ARG_WEIGHTS, conv2.w},
                           {DNNL_ARG_BIAS, conv2.bias},
                           {DNNL_ARG_DST, c2}});
    mark("05 conv2d_1 forward");
    if (v == 0) {
      relu_fwd(c2, N * 11 * 11 * 64);
      mark("06 relu forward (11x11x64)");
    }
    pool2.fwd.execute(st, {{DNNL_ARG_SRC, c2}, {DNNL_ARG_DST, p2}, {DNNL_ARG_WORKSPACE, pool2.ws}});
    mark("07 max_pooling2d_1 forward");
    // backward, from the gradient of the second pooling's output
    memory* g = &gp2;
    if (v > 0) {
      relu_bwd(p2, gp2, gp2m, N * 5 * 5 * 64);
      g = &gp2m;
      mark("08 relu backward (5x5x64)");
    }
    pool2.bwd.execute(
        st, {{DNNL_ARG_DIFF_DST, *g}, {DNNL_ARG_DIFF_SRC, gc2}, {DNNL_ARG_WORKSPACE, pool2.ws}});
    mark("09 max_pooling2d_1 backward");
    memory* gc = &gc2;
    if (v == 0) {
      relu_bwd(c2, gc2, gc2r, N * 11 * 11 * 64);
      gc = &gc2r;
      mark("10 relu backward (11x11x64)");
    }
    conv2.bwd_w.execute(st, {{DNNL_ARG_SRC, p1n},
                             {DNNL_ARG_DIFF_DST, *gc},
                             {DNNL_ARG_DIFF_WEIGHTS, conv2.dw},
                             {DNNL_ARG_DIFF_BIAS, conv2.dbias}});
    conv2.from_dw.execute(st, conv2.dw, conv2.dkernel);
    mark("11 conv2d_1 backward weights");
    conv2.to_w_data.execute(st, conv2.kernel, conv2.w_data);
    conv2.bwd_d.execute(st, {{DNNL_ARG_DIFF_DST, *gc},
                             {DNNL_ARG_WEIGHTS, conv2.w_data},
                             {DNNL_ARG_DIFF_SRC, v > 0 ? gp1n : gp1nm}});
    mark("12 conv2d_1 backward data");
    if (v > 0) {
      relu_bwd(p1n, gp1n, gp1nm, N * 13 * 13 * 32);
      mark("13 relu backward (13x13x32)");
    }
    if (v == 2) {
      gp1_to_blocked.execute(st, gp1nm, gp1);
      mark("14 reorder gradient nhwc->nChw16c");
    }
    pool1.bwd.execute(
        st, {{DNNL_ARG_DIFF_DST, gp1}, {DNNL_ARG_DIFF_SRC, gc1}, {DNNL_ARG_WORKSPACE, pool1.ws}});
    mark("15 max_pooling2d backward");
    gc = &gc1;
    if (v == 0) {
      relu_bwd(c1, gc1, gc1r, N * 26 * 26 * 32);
      gc = &gc1r;
      mark("16 relu backward (26x26x32)");
    }
    conv1.bwd_w.execute(st, {{DNNL_ARG_SRC, x},
                             {DNNL_ARG_DIFF_DST, *gc},
                             {DNNL_ARG_DIFF_WEIGHTS, conv1.dw},
                             {DNNL_ARG_DIFF_BIAS, conv1.dbias}});
    conv1.from_dw.execute(st, conv1.dw, conv1.dkernel);
    mark("17 conv2d backward weights");
    if (record)
      total.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  tandem::configure_process(argc, argv);
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  std::printf("cnn_variants: batch %lld, %d threads, %d rounds (medians, ms)\n",
              static_cast<long long>(N), tandem::cpu::compute_threads(), rounds);
  std::vector<std::unique_ptr<Variant>> vs;
  for (int v = 0; v < 3; ++v) vs.push_back(std::make_unique<Variant>(v));
  for (int r = 0; r < rounds + 10; ++r)
    for (auto& v : vs) v->step(r >= 10);
  const char* what[] = {"as the engine runs it",
                        "relu fused into the convolution, relu backward on the pooled gradient",
                        "V1 + first convolution and pooling in nChw16c"};
  for (auto& v : vs) {
    std::printf("V%d (%s)\n  conv2d: %s\n  conv2d_1: %s\n", v->v, what[v->v], v->conv1.impl.c_str(),
                v->conv2.impl.c_str());
    for (auto& [name, times] : v->t) std::printf("    %-36s %7.3f\n", name.c_str(), median(times));
    std::printf("  V%d chain: %.3f ms\n", v->v, median(v->total));
  }
  return 0;
}
