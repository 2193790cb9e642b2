// Every operation of the CUDA backend against the CPU backend on the same inputs (label "gpu";
// skipped without a device). Where both backends run backend/kernel_math.hpp's arithmetic element
// by element in the same order (dropout masks, optimizer updates, relu, embedding gathers and
// gradients, max pooling), the results are the same bits; where a library sums its own way
// (cuBLASLt, cuDNN and oneDNN GEMMs and convolutions), or a transcendental function differs by an
// ulp between glibc and CUDA, they agree to float rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/ops.hpp"
#include "cuda/backend/cuda_backend.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/cuda_handles.hpp"
#include "gpu/gpu_test_support.hpp"

namespace tandem {
namespace {

using backend::ActivationKind;

Tensor random_host(const Shape& shape, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.values()) v = dist(gen);
  return t;
}

class BackendOps : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_DEVICE();
    stream_ = std::make_unique<cuda::CudaStream>(0);
    allocator_ = std::make_shared<cuda::DeviceAllocator>(0);
    gemm_ = std::make_unique<cuda::DenseGemm>(*allocator_, stream_->get(), cuda::Precision::fp32);
    gpu_ = std::make_unique<cuda::CudaBackend>(allocator_, stream_->get(), *gemm_,
                                               cuda::Precision::fp32);
  }

  backend::Backend& cpu() { return backend::cpu_backend(); }
  backend::Backend& gpu() { return *gpu_; }

  Tensor up(const Tensor& host) {
    Tensor d = gpu_->tensor(host.shape());
    gpu_->copy(host, d);
    return d;
  }
  Tensor down(const Tensor& device) {
    Tensor h(device.shape());
    gpu_->copy(device, h);
    return h;
  }
  Tensor gpu_tensor(const Shape& shape) { return gpu_->tensor(shape); }

  static void expect_same(const Tensor& cpu, const Tensor& gpu, const std::string& what) {
    ASSERT_EQ(cpu.size(), gpu.size()) << what;
    int failures = 0;
    for (std::int64_t i = 0; i < cpu.size() && failures < 5; ++i)
      if (!(cpu[i] == gpu[i] || (std::isnan(cpu[i]) && std::isnan(gpu[i]))))
        ADD_FAILURE() << what << " [" << i << "]: CPU " << cpu[i] << ", CUDA " << gpu[i]
                      << (++failures == 5 ? " (and maybe more)" : "");
  }
  static void expect_close(const Tensor& cpu, const Tensor& gpu, double tolerance,
                           const std::string& what) {
    ASSERT_EQ(cpu.size(), gpu.size()) << what;
    int failures = 0;
    for (std::int64_t i = 0; i < cpu.size() && failures < 5; ++i)
      if (std::fabs(cpu[i] - gpu[i]) > tolerance * std::max(1.0f, std::fabs(cpu[i])))
        ADD_FAILURE() << what << " [" << i << "]: CPU " << cpu[i] << ", CUDA " << gpu[i]
                      << (++failures == 5 ? " (and maybe more)" : "");
  }

  std::unique_ptr<cuda::CudaStream> stream_;
  std::shared_ptr<cuda::DeviceAllocator> allocator_;
  std::unique_ptr<cuda::DenseGemm> gemm_;
  std::unique_ptr<cuda::CudaBackend> gpu_;
};

TEST_F(BackendOps, GemmsWithEveryEpilogueAndTransposeFollowTheCpu) {
  const std::int64_t m = 37, n = 29, k = 53;
  const Tensor a = random_host({m, k}, 1), b = random_host({k, n}, 2), bias = random_host({n}, 3);
  for (auto epilogue : {backend::GemmEpilogue::none, backend::GemmEpilogue::bias,
                        backend::GemmEpilogue::relu_bias}) {
    const backend::GemmDesc d{false, false, m, n, k, epilogue};
    Tensor c_cpu({m, n});
    cpu().gemm(d, a, b, &bias, c_cpu);
    Tensor c_gpu = gpu_tensor({m, n});
    const Tensor bias_gpu = up(bias);
    gpu().gemm(d, up(a), up(b), &bias_gpu, c_gpu);
    expect_close(c_cpu, down(c_gpu), 1e-5, "forward GEMM");
  }
  // dW = aᵀ g and dx = g bᵀ, as Dense's backward asks for them.
  const Tensor g = random_host({m, n}, 4);
  Tensor dw_cpu({k, n}), dw_gpu = gpu_tensor({k, n});
  cpu().gemm({true, false, k, n, m}, a, g, nullptr, dw_cpu);
  gpu().gemm({true, false, k, n, m}, up(a), up(g), nullptr, dw_gpu);
  expect_close(dw_cpu, down(dw_gpu), 1e-5, "weights GEMM");
  Tensor dx_cpu({m, k}), dx_gpu = gpu_tensor({m, k});
  cpu().gemm({false, true, m, k, n}, g, b, nullptr, dx_cpu);
  gpu().gemm({false, true, m, k, n}, up(g), up(b), nullptr, dx_gpu);
  expect_close(dx_cpu, down(dx_gpu), 1e-5, "data GEMM");
}

TEST_F(BackendOps, ColumnSumsMultiplyAndFillFollowTheCpu) {
  const Tensor x = random_host({300, 17}, 5), y = random_host({300, 17}, 6);
  Tensor s_cpu({17}), s_gpu = gpu_tensor({17});
  cpu().column_sums(x, 17, s_cpu);
  gpu().column_sums(up(x), 17, s_gpu);
  expect_close(s_cpu, down(s_gpu), 1e-5, "column sums");
  Tensor p_cpu({300, 17}), p_gpu = gpu_tensor({300, 17});
  cpu().multiply(x, y, p_cpu);
  gpu().multiply(up(x), up(y), p_gpu);
  expect_same(p_cpu, down(p_gpu), "multiply");
  Tensor f_cpu({5, 7}), f_gpu = gpu_tensor({5, 7});
  cpu().fill(f_cpu, 2.5f);
  gpu().fill(f_gpu, 2.5f);
  expect_same(f_cpu, down(f_gpu), "fill");
  cpu().fill(f_cpu, -0.0f);  // a kernel, not a memset: the sign bit kept
  gpu().fill(f_gpu, -0.0f);
  const Tensor negative_zeros = down(f_gpu);
  for (std::int64_t i = 0; i < f_cpu.size(); ++i)
    EXPECT_EQ(std::signbit(negative_zeros[i]), std::signbit(f_cpu[i])) << "fill(-0) [" << i << "]";
}

// The merging layers' operations: an element-wise sum (and with the relu an Add absorbs), and a
// block of columns between matrices (Concatenate's forward and its gradient's way back), bit for
// bit.
TEST_F(BackendOps, AddAndColumnBlocksAreTheCpusBitForBit) {
  const Tensor x = random_host({300, 17}, 7), y = random_host({300, 17}, 8);
  Tensor a_cpu({300, 17}), a_gpu = gpu_tensor({300, 17});
  cpu().add(x, y, a_cpu);
  gpu().add(up(x), up(y), a_gpu);
  expect_same(a_cpu, down(a_gpu), "add");
  cpu().add_relu(x, y, a_cpu);
  gpu().add_relu(up(x), up(y), a_gpu);
  expect_same(a_cpu, down(a_gpu), "add_relu");
  Tensor c_cpu({300, 40}), c_gpu = gpu_tensor({300, 40});
  cpu().fill(c_cpu, -1.0f);
  gpu().fill(c_gpu, -1.0f);
  cpu().copy_columns(x, 17, 2, c_cpu, 40, 21, 15);
  gpu().copy_columns(up(x), 17, 2, c_gpu, 40, 21, 15);
  expect_same(c_cpu, down(c_gpu), "copy_columns");
  EXPECT_THROW(gpu().copy_columns(up(x), 17, 5, c_gpu, 40, 0, 15), std::logic_error);
}

// The element-wise merging operations (Subtract, Average's scaling, Maximum and Minimum and
// their gradient routing): kernel_math's float operations on both, so the same bits.
TEST_F(BackendOps, ElementwiseMergingOperationsAreTheCpusBitForBit) {
  const Tensor x = random_host({300, 17}, 21), y = random_host({300, 17}, 22);
  const Tensor z = random_host({300, 17}, 23);
  Tensor s_cpu({300, 17}), s_gpu = gpu_tensor({300, 17});
  cpu().subtract(x, y, s_cpu);
  gpu().subtract(up(x), up(y), s_gpu);
  expect_same(s_cpu, down(s_gpu), "subtract");
  cpu().affine(x, 1.0f / 3.0f, 0.25f, s_cpu);
  gpu().affine(up(x), 1.0f / 3.0f, 0.25f, s_gpu);
  expect_same(s_cpu, down(s_gpu), "affine");
  const Tensor scale = random_host({17}, 24), shift = random_host({17}, 25);
  const Tensor shift_gpu = up(shift);
  cpu().column_affine(x, scale, &shift, s_cpu, 17);
  gpu().column_affine(up(x), up(scale), &shift_gpu, s_gpu, 17);
  expect_same(s_cpu, down(s_gpu), "column_affine");
  // Normalization's factors (variances: some zero, under the 1e-7 floor), both ways round.
  Tensor variance = random_host({17}, 26);
  for (std::int64_t c = 0; c < 17; ++c) variance[c] = c % 5 == 0 ? 0.0f : std::fabs(variance[c]);
  for (bool invert : {false, true}) {
    Tensor a_cpu({17}), b_cpu({17}), a_gpu = gpu_tensor({17}), b_gpu = gpu_tensor({17});
    cpu().normalization_factors(shift, variance, invert, a_cpu, b_cpu);
    gpu().normalization_factors(shift_gpu, up(variance), invert, a_gpu, b_gpu);
    expect_same(a_cpu, down(a_gpu), "normalization_factors' scale");
    expect_same(b_cpu, down(b_gpu), "normalization_factors' shift");
  }
  for (bool maximum : {true, false}) {
    Tensor m_cpu({300, 17}), w_cpu({300, 17}), m_gpu = gpu_tensor({300, 17}),
                             w_gpu = gpu_tensor({300, 17});
    int index = 0;
    for (const Tensor* t : {&x, &y, &z}) {
      cpu().extreme_update(maximum, *t, index, m_cpu, w_cpu);
      gpu().extreme_update(maximum, up(*t), index, m_gpu, w_gpu);
      ++index;
    }
    expect_same(m_cpu, down(m_gpu), maximum ? "maximum" : "minimum");
    expect_same(w_cpu, down(w_gpu), "winners");
    Tensor r_cpu({300, 17}), r_gpu = gpu_tensor({300, 17});
    cpu().route_gradient(w_cpu, 1, z, r_cpu);
    gpu().route_gradient(w_gpu, 1, up(z), r_gpu);
    expect_same(r_cpu, down(r_gpu), "routed gradient");
  }
}

// The ReLU family with parameters: kernel_math's pieces; ELU's exp may differ by an ulp.
TEST_F(BackendOps, ShapedActivationsFollowTheCpu) {
  const Tensor x = random_host({300, 17}, 51, -8, 8), g = random_host({300, 17}, 52);
  backend::ShapedActivation relu6;
  relu6.capped = true;
  relu6.max_value = 6;
  relu6.negative_slope = 0.1f;
  relu6.threshold = 0.5f;
  backend::ShapedActivation elu;
  elu.elu = true;
  elu.alpha = 0.7f;
  for (const auto& a : {relu6, elu}) {
    Tensor y_cpu({300, 17}), y_gpu = gpu_tensor({300, 17});
    cpu().shaped_activation_forward(a, x, y_cpu);
    gpu().shaped_activation_forward(a, up(x), y_gpu);
    expect_close(y_cpu, down(y_gpu), 1e-6, a.elu ? "elu" : "relu");
    Tensor d_cpu({300, 17}), d_gpu = gpu_tensor({300, 17});
    cpu().shaped_activation_backward(a, x, g, d_cpu);
    gpu().shaped_activation_backward(a, up(x), up(g), d_gpu);
    expect_close(d_cpu, down(d_gpu), 1e-6, a.elu ? "elu gradient" : "relu gradient");
  }
}

// PReLU with an alpha per channel of (4, 5, 3) samples: outputs and input gradients the same
// bits, alpha's gradient summed in the same order in double.
TEST_F(BackendOps, PReLUFollowsTheCpu) {
  backend::PreluDesc d;
  d.rank = 3;
  d.dims[0] = 4, d.dims[1] = 5, d.dims[2] = 3;
  d.grouped[0] = d.grouped[1] = true;
  d.size = 60, d.groups = 3, d.per_group = 20;
  const Tensor x = random_host({7, 4, 5, 3}, 61), g = random_host({7, 4, 5, 3}, 62),
               alpha = random_host({1, 1, 3}, 63);
  Tensor y_cpu({7, 4, 5, 3}), y_gpu = gpu_tensor({7, 4, 5, 3});
  cpu().prelu_forward(d, x, alpha, y_cpu);
  gpu().prelu_forward(d, up(x), up(alpha), y_gpu);
  expect_close(y_cpu, down(y_gpu), 0, "prelu");
  Tensor dx_cpu({7, 4, 5, 3}), dx_gpu = gpu_tensor({7, 4, 5, 3});
  Tensor da_cpu({1, 1, 3}), da_gpu = gpu_tensor({1, 1, 3});
  cpu().prelu_backward(d, x, alpha, g, &dx_cpu, &da_cpu);
  gpu().prelu_backward(d, up(x), up(alpha), up(g), &dx_gpu, &da_gpu);
  expect_close(dx_cpu, down(dx_gpu), 0, "prelu input gradient");
  expect_close(da_cpu, down(da_gpu), 0, "prelu alpha gradient");
}

// One LSTM and one GRU step and their gradients over 37 rows of 5 units (recurrent_math.hpp on
// both sides): the same arithmetic, but for CUDA's tanh and exp against glibc's (a few ulp).
TEST_F(BackendOps, RecurrentStepsFollowTheCpu) {
  const backend::RecurrentCellDesc d{5, ActivationKind::tanh, ActivationKind::sigmoid};
  const std::int64_t rows = 37;
  const Tensor xw = random_host({rows, 20}, 71, -2, 2), rec = random_host({rows, 20}, 72, -2, 2),
               c_prev = random_host({rows, 5}, 73), dh = random_host({rows, 5}, 74),
               dc_next = random_host({rows, 5}, 75);
  Tensor pre_cpu({rows, 20}), c_cpu({rows, 5}), h_cpu({rows, 5});
  Tensor pre_gpu = gpu_tensor({rows, 20}), c_gpu = gpu_tensor({rows, 5}),
         h_gpu = gpu_tensor({rows, 5});
  cpu().lstm_step_forward(d, xw, rec, c_prev, pre_cpu, c_cpu, h_cpu);
  gpu().lstm_step_forward(d, up(xw), up(rec), up(c_prev), pre_gpu, c_gpu, h_gpu);
  expect_same(pre_cpu, down(pre_gpu), "lstm pre-activations");
  expect_close(c_cpu, down(c_gpu), 1e-6, "lstm c");
  expect_close(h_cpu, down(h_gpu), 1e-6, "lstm h");
  Tensor dc_cpu = dc_next.clone(), dc_gpu = up(dc_next);
  Tensor dpre_cpu({rows, 20}), dpre_gpu = gpu_tensor({rows, 20});
  cpu().lstm_step_backward(d, pre_cpu, c_prev, c_cpu, dh, dc_cpu, dpre_cpu);
  gpu().lstm_step_backward(d, up(pre_cpu), up(c_prev), up(c_cpu), up(dh), dc_gpu, dpre_gpu);
  expect_close(dc_cpu, down(dc_gpu), 1e-6, "lstm dc_prev");
  expect_close(dpre_cpu, down(dpre_gpu), 1e-6, "lstm d_pre");

  const Tensor gxw = random_host({rows, 15}, 76, -2, 2), grec = random_host({rows, 15}, 77, -2, 2);
  Tensor gpre_cpu({rows, 20}), gh_cpu({rows, 5});
  Tensor gpre_gpu = gpu_tensor({rows, 20}), gh_gpu = gpu_tensor({rows, 5});
  cpu().gru_step_forward(d, gxw, grec, c_prev, gpre_cpu, gh_cpu);
  gpu().gru_step_forward(d, up(gxw), up(grec), up(c_prev), gpre_gpu, gh_gpu);
  expect_close(gpre_cpu, down(gpre_gpu), 1e-6, "gru pre-activations");
  expect_close(gh_cpu, down(gh_gpu), 1e-6, "gru h");
  Tensor dxw_cpu({rows, 15}), drec_cpu({rows, 15}), dhp_cpu({rows, 5});
  Tensor dxw_gpu = gpu_tensor({rows, 15}), drec_gpu = gpu_tensor({rows, 15}),
         dhp_gpu = gpu_tensor({rows, 5});
  cpu().gru_step_backward(d, gpre_cpu, c_prev, dh, dxw_cpu, drec_cpu, dhp_cpu);
  gpu().gru_step_backward(d, up(gpre_cpu), up(c_prev), up(dh), dxw_gpu, drec_gpu, dhp_gpu);
  expect_close(dxw_cpu, down(dxw_gpu), 1e-6, "gru d_xw");
  expect_close(drec_cpu, down(drec_gpu), 1e-6, "gru d_rec");
  expect_close(dhp_cpu, down(dhp_gpu), 1e-6, "gru dh_prev");
}

// Sequence masks: a row kept where any value differs from the mask value (NaN included), and
// rows chosen by a mask: the same bits.
TEST_F(BackendOps, SequenceMasksAreTheCpusBitForBit) {
  Tensor x = random_host({9, 3}, 81);
  for (std::int64_t c = 0; c < 3; ++c) x[3 * 3 + c] = x[5 * 3 + c] = 0.5f;
  x[5 * 3 + 1] = std::nanf("");
  Tensor mask_cpu({9}), mask_gpu = gpu_tensor({9});
  cpu().sequence_mask(x, 0.5f, 3, mask_cpu);
  gpu().sequence_mask(up(x), 0.5f, 3, mask_gpu);
  expect_same(mask_cpu, down(mask_gpu), "sequence_mask");
  EXPECT_EQ(mask_cpu[3], 0.0f);
  EXPECT_EQ(mask_cpu[5], 1.0f);
  const Tensor a = random_host({9, 4}, 82), b = random_host({9, 4}, 83);
  Tensor out_cpu({9, 4}), out_gpu = gpu_tensor({9, 4});
  cpu().select_rows(mask_cpu, a, &b, out_cpu, 4);
  gpu().select_rows(up(mask_cpu), up(a), &static_cast<const Tensor&>(up(b)), out_gpu, 4);
  expect_same(out_cpu, down(out_gpu), "select_rows");
  cpu().select_rows(mask_cpu, a, nullptr, out_cpu, 4);
  gpu().select_rows(up(mask_cpu), up(a), nullptr, out_gpu, 4);
  expect_same(out_cpu, down(out_gpu), "select_rows with zeros");
  // The mean over the kept steps: 3 samples of 3 steps of 4 channels.
  const Tensor steps = random_host({3, 3, 4}, 84), dy = random_host({3, 4}, 85);
  Tensor mean_cpu({3, 4}), mean_gpu = gpu_tensor({3, 4});
  cpu().masked_average_steps(steps, mask_cpu, mean_cpu, 3, 4);
  gpu().masked_average_steps(up(steps), up(mask_cpu), mean_gpu, 3, 4);
  expect_same(mean_cpu, down(mean_gpu), "masked_average_steps");
  Tensor dx_cpu({3, 3, 4}), dx_gpu = gpu_tensor({3, 3, 4});
  cpu().masked_average_steps_backward(dy, mask_cpu, dx_cpu, 3, 4);
  gpu().masked_average_steps_backward(up(dy), up(mask_cpu), dx_gpu, 3, 4);
  expect_same(dx_cpu, down(dx_gpu), "masked_average_steps_backward");
}

// A MaxNorm over a (12, 9) kernel's columns and a NonNeg: the same bits (norms in double).
TEST_F(BackendOps, ConstraintsFollowTheCpu) {
  for (const auto kind : {backend::ConstraintDesc::Kind::max_norm,
                          backend::ConstraintDesc::Kind::non_neg,
                          backend::ConstraintDesc::Kind::min_max_norm}) {
    backend::ConstraintDesc c;
    c.kind = kind;
    c.max_value = 1.5f, c.min_value = 0.5f, c.rate = 0.7f;
    c.axes.rank = 2;
    c.axes.dims[0] = 12, c.axes.dims[1] = 9;
    c.axes.grouped[0] = true;
    c.axes.size = 108, c.axes.groups = 9, c.axes.per_group = 12;
    Tensor w_cpu = random_host({12, 9}, 71);
    Tensor w_gpu = up(w_cpu);
    cpu().apply_constraint(c, w_cpu);
    gpu().apply_constraint(c, w_gpu);
    expect_close(w_cpu, down(w_gpu), 0, "constraint");
  }
}

// Attention's operations: batched GEMMs (cuBLASLt's sums: to rounding), the masked softmax and
// the axis swap (the same bits where no transcendental differs), layer normalization.
TEST_F(BackendOps, AttentionAndLayerNormOperationsFollowTheCpu) {
  const std::int64_t batch = 6, m = 9, n = 7, k = 5;
  const Tensor a = random_host({batch, m, k}, 31), b = random_host({batch, n, k}, 32);
  Tensor c_cpu({batch, m, n}), c_gpu = gpu_tensor({batch, m, n});
  const backend::GemmDesc d{false, true, m, n, k, backend::GemmEpilogue::none, batch};
  cpu().gemm(d, a, b, nullptr, c_cpu);
  gpu().gemm(d, up(a), up(b), nullptr, c_gpu);
  expect_close(c_cpu, down(c_gpu), 1e-5, "batched GEMM");

  // (batch 3, heads 2, tq 3, tk 7), causal; sample 0's first query sees no key.
  const Tensor scores = random_host({3, 2, 3, n}, 33, -4, 4);
  const Tensor d_probs = random_host({3, 2, 3, n}, 40);
  Tensor mask = random_host({3, 3, n}, 34, 0, 1);
  for (float& v : mask.values()) v = v < 0.3f ? 0.0f : 1.0f;
  mask[0] = 0;
  const Tensor mask_gpu = up(mask);
  for (const backend::HiddenRows hidden : {backend::HiddenRows::zeros, backend::HiddenRows::uniform,
                                           backend::HiddenRows::keras2_additive}) {
    const backend::AttentionMaskDesc md{2, 3, n, true, hidden};
    Tensor p_cpu(scores.shape()), p_gpu = gpu_tensor(scores.shape());
    cpu().masked_softmax(md, scores, &mask, p_cpu);
    gpu().masked_softmax(md, up(scores), &mask_gpu, p_gpu);
    expect_close(p_cpu, down(p_gpu), 1e-6, "masked softmax");
    Tensor g_cpu(scores.shape()), g_gpu = gpu_tensor(scores.shape());
    cpu().masked_softmax_backward(md, p_cpu, &mask, d_probs, g_cpu);
    gpu().masked_softmax_backward(md, up(p_cpu), &mask_gpu, up(d_probs), g_gpu);
    expect_close(g_cpu, down(g_gpu), 1e-6, "masked softmax backward");
  }

  // Unit normalization over axes 0 and 2 of (3, 2, 4) samples; a zero group takes the floor.
  backend::UnitNormDesc un;
  un.rank = 3;
  un.dims[0] = 3, un.dims[1] = 2, un.dims[2] = 4;
  un.grouped[0] = un.grouped[2] = true;
  un.size = 24, un.groups = 2, un.per_group = 12;
  Tensor un_x = random_host({5, 3, 2, 4}, 66);
  for (std::int64_t i = 0; i < 24; ++i)
    if ((i / 4) % 2 == 1) un_x[i] = 0;  // sample 0's second group
  const Tensor un_dy = random_host({5, 3, 2, 4}, 67);
  Tensor un_y_cpu({5, 3, 2, 4}), un_y_gpu = gpu_tensor({5, 3, 2, 4});
  cpu().unit_normalize(un, un_x, un_y_cpu);
  gpu().unit_normalize(un, up(un_x), un_y_gpu);
  expect_close(un_y_cpu, down(un_y_gpu), 1e-6, "unit_normalize");
  Tensor un_dx_cpu({5, 3, 2, 4}), un_dx_gpu = gpu_tensor({5, 3, 2, 4});
  cpu().unit_normalize_backward(un, un_x, un_dy, un_dx_cpu);
  gpu().unit_normalize_backward(un, up(un_x), up(un_dy), un_dx_gpu);
  expect_close(un_dx_cpu, down(un_dx_gpu), 1e-6, "unit_normalize_backward");

  // Additive scores with per-feature weights, with a factor, and with neither: the scores and
  // every gradient (the per query row shares of the weights' and the factor's).
  const Tensor aq = random_host({2, 3, 4}, 61), ak = random_host({2, 5, 4}, 62),
               aw = random_host({4}, 63), as = random_host({1}, 64),
               ag = random_host({2, 3, 5}, 65);
  const Tensor aw_gpu = up(aw), as_gpu = up(as);
  for (const auto [weighted, factored] :
       {std::pair{true, false}, std::pair{false, true}, std::pair{false, false}}) {
    const backend::AdditiveScoresDesc ad{2, 3, 5, 4, weighted, factored};
    const Tensor* w = weighted ? &aw : nullptr;
    const Tensor* f = factored ? &as : nullptr;
    const Tensor* w_gpu = weighted ? &aw_gpu : nullptr;
    const Tensor* f_gpu = factored ? &as_gpu : nullptr;
    // The pairs' tanh: oneDNN's on the CPU, CUDA's tanhf (a few ulp apart); the steps after
    // them take the CPU's pairs on both sides.
    Tensor p_cpu({2, 3, 5, 4}), p_gpu = gpu_tensor({2, 3, 5, 4});
    cpu().additive_pairs(ad, aq, ak, f, p_cpu);
    gpu().additive_pairs(ad, up(aq), up(ak), f_gpu, p_gpu);
    expect_close(p_cpu, down(p_gpu), 1e-6, "additive pairs");
    Tensor s_cpu({2, 3, 5}), s_gpu = gpu_tensor({2, 3, 5});
    cpu().additive_scores(ad, p_cpu, w, s_cpu);
    gpu().additive_scores(ad, up(p_cpu), w_gpu, s_gpu);
    expect_close(s_cpu, down(s_gpu), 1e-6, "additive scores");
    Tensor dq_cpu({2, 3, 4}), dk_cpu({2, 5, 4}), wp_cpu({6, 4}), fp_cpu({6});
    Tensor dq_gpu = gpu_tensor({2, 3, 4}), dk_gpu = gpu_tensor({2, 5, 4}),
           wp_gpu = gpu_tensor({6, 4}), fp_gpu = gpu_tensor({6});
    cpu().additive_scores_backward(ad, aq, ak, p_cpu, w, f, ag, &dq_cpu, &dk_cpu, &wp_cpu, &fp_cpu);
    gpu().additive_scores_backward(ad, up(aq), up(ak), up(p_cpu), w_gpu, f_gpu, up(ag), &dq_gpu,
                                   &dk_gpu, &wp_gpu, &fp_gpu);
    expect_close(dq_cpu, down(dq_gpu), 1e-6, "additive scores d_query");
    expect_close(dk_cpu, down(dk_gpu), 1e-6, "additive scores d_key");
    expect_close(wp_cpu, down(wp_gpu), 1e-6, "additive scores weight parts");
    expect_close(fp_cpu, down(fp_gpu), 1e-6, "additive scores factor parts");
  }

  Tensor t_cpu({2, 4, 3, 5}), t_gpu = gpu_tensor({2, 4, 3, 5});
  const Tensor x = random_host({2, 3, 4, 5}, 35);
  cpu().swap_middle_axes(x, {2, 3, 4, 5}, t_cpu);
  gpu().swap_middle_axes(up(x), {2, 3, 4, 5}, t_gpu);
  expect_same(t_cpu, down(t_gpu), "swap_middle_axes");

  const backend::LayerNormDesc ld{16, 1e-3};
  const Tensor ln_x = random_host({40, 16}, 36), gamma = random_host({16}, 37),
               beta = random_host({16}, 38), dy = random_host({40, 16}, 39);
  Tensor y_cpu({40, 16}), stats_cpu, y_gpu = gpu_tensor({40, 16}), stats_gpu = gpu_tensor({0});
  const Tensor gamma_gpu = up(gamma), beta_gpu = up(beta), x_gpu = up(ln_x);
  cpu().layer_norm_forward(ld, ln_x, &gamma, &beta, y_cpu, stats_cpu);
  gpu().layer_norm_forward(ld, x_gpu, &gamma_gpu, &beta_gpu, y_gpu, stats_gpu);
  expect_close(y_cpu, down(y_gpu), 1e-6, "layer norm");
  Tensor dx_cpu({40, 16}), dg_cpu({16}), db_cpu({16});
  Tensor dx_gpu = gpu_tensor({40, 16}), dg_gpu = gpu_tensor({16}), db_gpu = gpu_tensor({16});
  cpu().layer_norm_backward(ld, ln_x, dy, &gamma, stats_cpu, &dx_cpu, &dg_cpu, &db_cpu);
  gpu().layer_norm_backward(ld, x_gpu, up(dy), &gamma_gpu, stats_gpu, &dx_gpu, &dg_gpu, &db_gpu);
  expect_close(dx_cpu, down(dx_gpu), 1e-6, "layer norm dx");
  expect_close(dg_cpu, down(dg_gpu), 1e-6, "layer norm d_gamma");
  expect_close(db_cpu, down(db_gpu), 1e-6, "layer norm d_beta");

  // The root-mean-square forms: rms_scaling (the mean left in) and RMSNormalization; gamma
  // alone.
  for (const backend::LayerNormDesc rd : {backend::LayerNormDesc{16, 1e-3, true, false},
                                          backend::LayerNormDesc{16, 1e-6, false, false}}) {
    const std::string form = rd.centred_variance ? "rms_scaling" : "rms normalization";
    cpu().layer_norm_forward(rd, ln_x, &gamma, nullptr, y_cpu, stats_cpu);
    gpu().layer_norm_forward(rd, x_gpu, &gamma_gpu, nullptr, y_gpu, stats_gpu);
    expect_close(y_cpu, down(y_gpu), 1e-6, form);
    cpu().layer_norm_backward(rd, ln_x, dy, &gamma, stats_cpu, &dx_cpu, &dg_cpu, nullptr);
    gpu().layer_norm_backward(rd, x_gpu, up(dy), &gamma_gpu, stats_gpu, &dx_gpu, &dg_gpu, nullptr);
    expect_close(dx_cpu, down(dx_gpu), 1e-6, form + " dx");
    expect_close(dg_cpu, down(dg_gpu), 1e-6, form + " d_gamma");
  }
}

// x[:, ::-2, 1:3] of a batch (2, 3, 4) as a strided view, and its scatter back into zeros: the
// values move, the same bits.
TEST_F(BackendOps, StridedViewsAreTheCpusBitForBit) {
  const Tensor x = random_host({2, 3, 4}, 43);
  backend::StridedView v;
  v.rank = 3;
  v.dims[0] = 2, v.dims[1] = 2, v.dims[2] = 2;
  v.strides[0] = 12, v.strides[1] = -8, v.strides[2] = 1;
  v.offset = 2 * 4 + 1;
  Tensor y_cpu({2, 2, 2}), y_gpu = gpu_tensor({2, 2, 2});
  cpu().gather_view(v, x, y_cpu);
  gpu().gather_view(v, up(x), y_gpu);
  expect_same(y_cpu, down(y_gpu), "gather_view");
  Tensor dx_cpu({2, 3, 4}), dx_gpu = gpu_tensor({2, 3, 4});
  cpu().fill(dx_cpu, 0.0f);
  gpu().fill(dx_gpu, 0.0f);
  cpu().scatter_view(v, y_cpu, dx_cpu);
  gpu().scatter_view(v, up(y_cpu), dx_gpu);
  expect_same(dx_cpu, down(dx_gpu), "scatter_view");
}

// Padding, cropping and upsampling move whole cells: the same bits (the upsampling gradient
// sums each block in the same order).
TEST_F(BackendOps, ImageBlocksAndUpsamplingAreTheCpusBitForBit) {
  const Tensor x = random_host({2, 4, 5, 3}, 41);
  backend::ImageBlock b{2, 3, 4, 5, 7, 9, 0, 0, 1, 3, 4, 5};  // pad by (1, 2) rows, (3, 1) cols
  Tensor y_cpu({2, 7, 9, 3}), y_gpu = gpu_tensor({2, 7, 9, 3});
  cpu().fill(y_cpu, 0.0f);
  gpu().fill(y_gpu, 0.0f);
  cpu().copy_image_block(b, x, y_cpu);
  gpu().copy_image_block(b, up(x), y_gpu);
  expect_same(y_cpu, down(y_gpu), "copy_image_block");
  const backend::UpsampleDesc d{2, 4, 5, 3, 2, 3};
  Tensor u_cpu({2, 8, 15, 3}), u_gpu = gpu_tensor({2, 8, 15, 3});
  cpu().upsample_forward(d, x, u_cpu);
  gpu().upsample_forward(d, up(x), u_gpu);
  expect_same(u_cpu, down(u_gpu), "upsample_forward");
  const Tensor g = random_host({2, 8, 15, 3}, 42);
  Tensor dx_cpu({2, 4, 5, 3}), dx_gpu = gpu_tensor({2, 4, 5, 3});
  cpu().upsample_backward(d, g, dx_cpu);
  gpu().upsample_backward(d, up(g), dx_gpu);
  expect_same(dx_cpu, down(dx_gpu), "upsample_backward");
}

TEST_F(BackendOps, ActivationsAndTheirGradientsFollowTheCpu) {
  const std::int64_t rows = 23, cols = 19;
  const Tensor x = random_host({rows, cols}, 7, -4.0f, 4.0f);
  const Tensor g = random_host({rows, cols}, 8);
  for (auto kind : {ActivationKind::linear, ActivationKind::relu, ActivationKind::tanh,
                    ActivationKind::sigmoid, ActivationKind::softmax, ActivationKind::gelu,
                    ActivationKind::elu, ActivationKind::selu, ActivationKind::softplus,
                    ActivationKind::softsign, ActivationKind::swish, ActivationKind::exponential,
                    ActivationKind::leaky_relu, ActivationKind::hard_sigmoid,
                    ActivationKind::hard_swish, ActivationKind::mish,
                    ActivationKind::log_softmax}) {
    const std::string name = "activation " + std::to_string(static_cast<int>(kind));
    Tensor y_cpu({rows, cols}), y_gpu = gpu_tensor({rows, cols});
    cpu().activation_forward(kind, x, y_cpu, cols);
    const Tensor x_gpu = up(x);
    gpu().activation_forward(kind, x_gpu, y_gpu, cols);
    expect_close(y_cpu, down(y_gpu), 2e-5, name + " forward");
    // The gradient from the same y on both sides (the CPU's), so only the derivative differs.
    Tensor gi_cpu({rows, cols}), gi_gpu = gpu_tensor({rows, cols});
    cpu().activation_backward(kind, x, y_cpu, g, gi_cpu, cols);
    gpu().activation_backward(kind, x_gpu, up(y_cpu), up(g), gi_gpu, cols);
    if (kind == ActivationKind::relu || kind == ActivationKind::linear)
      expect_same(gi_cpu, down(gi_gpu), name + " backward");
    else
      expect_close(gi_cpu, down(gi_gpu), 2e-5, name + " backward");
  }
}

backend::DropoutDesc dropout_desc(std::uint64_t stream, std::uint64_t call, double rate,
                                  std::int64_t first_sample) {
  backend::DropoutDesc d;
  d.stream = stream;
  d.call = call;
  d.rate = rate;
  d.first_sample = first_sample;
  return d;
}

TEST_F(BackendOps, DropoutMasksAreTheCpusBitForBit) {
  const Tensor x = random_host({64, 33}, 9);
  const backend::DropoutDesc d = dropout_desc(12345, 7, 0.3, 1000);
  Tensor y_cpu({64, 33}), m_cpu({64, 33});
  cpu().dropout_forward(d, x, y_cpu, m_cpu, 33);
  Tensor y_gpu = gpu_tensor({64, 33}), m_gpu = gpu_tensor({64, 33});
  gpu().dropout_forward(d, up(x), y_gpu, m_gpu, 33);
  expect_same(m_cpu, down(m_gpu), "dropout mask");
  expect_same(y_cpu, down(y_gpu), "dropout output");
  // The device counts the call: the next forward draws the CPU's call 8.
  cpu().dropout_forward(dropout_desc(12345, 8, 0.3, 1000), x, y_cpu, m_cpu, 33);
  gpu().dropout_forward(d, up(x), y_gpu, m_gpu, 33);
  expect_same(m_cpu, down(m_gpu), "dropout mask of the next call");
  EXPECT_EQ(gpu_->dropout_calls().at(12345), 9u);
}

// Keras' noise_shape: samples of (3, 11) with the 11-axis shared (one mask value per row of 11),
// as SpatialDropout1D draws them.
TEST_F(BackendOps, SharedNoiseMasksAndNormalNoiseFollowTheCpu) {
  const Tensor x = random_host({16, 33}, 10);
  backend::DropoutDesc d = dropout_desc(777, 2, 0.5, 40);
  d.noise.rank = 2;
  d.noise.dims[0] = 3;
  d.noise.dims[1] = 11;
  d.noise.grouped[1] = true;
  d.noise.size = 33;
  d.noise.groups = 3;
  d.noise.per_group = 11;
  Tensor y_cpu({16, 33}), m_cpu({16, 33});
  cpu().dropout_forward(d, x, y_cpu, m_cpu, 33);
  Tensor y_gpu = gpu_tensor({16, 33}), m_gpu = gpu_tensor({16, 33});
  gpu().dropout_forward(d, up(x), y_gpu, m_gpu, 33);
  expect_same(m_cpu, down(m_gpu), "shared dropout mask");

  // Normal noise: the same hash, only log and cos from another library.
  const backend::DropoutDesc n = dropout_desc(4242, 0, 0.0, 7);
  Tensor noise_cpu({128, 50});
  cpu().normal_noise(n, noise_cpu, 50);
  Tensor noise_gpu = gpu_tensor({128, 50});
  gpu().normal_noise(n, noise_gpu, 50);
  expect_close(noise_cpu, down(noise_gpu), 1e-5, "normal noise");
  EXPECT_EQ(gpu_->dropout_calls().at(4242), 1u);
}

TEST_F(BackendOps, PoolingAndGlobalPoolingFollowTheCpu) {
  backend::PoolingDesc desc;
  desc.label = "pooling test";
  desc.geometry = {{9, 5, 2, 2, 1, 0}, {8, 4, 2, 2, 1, 0}, 6};  // 9x8x6 -> 5x4 (SAME)
  const Tensor x = random_host({3, 9, 8, 6}, 10);
  for (auto kind : {backend::PoolKind::max, backend::PoolKind::average}) {
    desc.kind = kind;
    auto on_cpu = cpu().pooling(desc);
    auto on_gpu = gpu().pooling(desc);
    Tensor y_cpu, y_gpu = gpu_->tensor();
    on_cpu->forward(x, y_cpu);
    on_gpu->forward(up(x), y_gpu);
    const Tensor dy = random_host(y_cpu.shape(), 11);
    Tensor dx_cpu, dx_gpu = gpu_->tensor();
    on_cpu->backward(dy, dx_cpu);
    on_gpu->backward(up(dy), dx_gpu);
    if (kind == backend::PoolKind::max) {
      expect_same(y_cpu, down(y_gpu), "max pooling");
      expect_same(dx_cpu, down(dx_gpu), "max pooling gradient");
    } else {
      expect_close(y_cpu, down(y_gpu), 1e-6, "average pooling");
      expect_close(dx_cpu, down(dx_gpu), 1e-6, "average pooling gradient");
    }
  }
  Tensor g_cpu({3, 6}), g_gpu = gpu_tensor({3, 6});
  cpu().global_average_pool_forward(x, g_cpu, 72, 6);
  gpu().global_average_pool_forward(up(x), g_gpu, 72, 6);
  expect_same(g_cpu, down(g_gpu), "global average pooling");

  // SpectralNormalization's update: the same estimate to rounding (the norms' sums in another
  // order), u too.
  {
    const backend::SpectralNormDesc sd{18, 6, 2};
    Tensor k_cpu = random_host({3, 3, 2, 6}, 14), u_cpu = random_host({1, 6}, 15);
    Tensor k_gpu = up(k_cpu), u_gpu = up(u_cpu);
    cpu().spectral_normalize(sd, k_cpu, u_cpu);
    gpu().spectral_normalize(sd, k_gpu, u_gpu);
    expect_close(k_cpu, down(k_gpu), 1e-6, "spectral normalization kernel");
    expect_close(u_cpu, down(u_gpu), 1e-6, "spectral normalization u");
  }
  // Adaptive pooling: adaptive_pool_math.hpp's arithmetic on both, the same bits (the gradient
  // gathers its windows in output order on both).
  for (const bool max : {false, true}) {
    backend::AdaptivePoolDesc d;
    d.max = max;
    d.batch = 3;
    d.channels = 4;
    d.in[0] = 3, d.in[1] = 7, d.in[2] = 5;
    d.out[0] = 2, d.out[1] = 3, d.out[2] = 4;
    const Tensor v = random_host({3, 3, 7, 5, 4}, 12), dv = random_host({3, 2, 3, 4, 4}, 13);
    Tensor a_cpu({3, 2, 3, 4, 4}), arg_cpu, a_gpu = gpu_tensor({3, 2, 3, 4, 4}),
                                            arg_gpu = gpu_tensor({0});
    cpu().adaptive_pool_forward(d, v, a_cpu, arg_cpu);
    gpu().adaptive_pool_forward(d, up(v), a_gpu, arg_gpu);
    expect_same(a_cpu, down(a_gpu), max ? "adaptive max pooling" : "adaptive average pooling");
    Tensor da_cpu({3, 3, 7, 5, 4}), da_gpu = gpu_tensor({3, 3, 7, 5, 4});
    cpu().adaptive_pool_backward(d, dv, arg_cpu, da_cpu);
    gpu().adaptive_pool_backward(d, up(dv), arg_gpu, da_gpu);
    expect_same(da_cpu, down(da_gpu), max ? "adaptive max gradient" : "adaptive average gradient");
  }
}

TEST_F(BackendOps, ConvolutionFollowsTheCpu) {
  backend::ConvolutionDesc desc;
  desc.label = "convolution test";
  desc.geometry = {{12, 12, 3, 1, 1, 1}, {10, 10, 3, 1, 1, 1}, 4};  // SAME 3x3
  desc.filters = 5;
  const Tensor x = random_host({6, 12, 10, 4}, 12);
  const Tensor kernel = random_host({3, 3, 4, 5}, 13), bias = random_host({5}, 14);
  auto on_cpu = cpu().convolution(desc);
  auto on_gpu = gpu().convolution(desc);
  const Tensor x_gpu = up(x), k_gpu = up(kernel), b_gpu = up(bias);
  Tensor y_cpu, y_gpu = gpu_->tensor();
  on_cpu->forward(x, kernel, &bias, y_cpu);
  on_gpu->forward(x_gpu, k_gpu, &b_gpu, y_gpu);
  expect_close(y_cpu, down(y_gpu), 1e-4, "convolution");
  const Tensor dy = random_host(y_cpu.shape(), 15);
  Tensor dk_cpu(kernel.shape()), db_cpu({5}), dk_gpu = gpu_tensor(kernel.shape()),
      db_gpu = gpu_tensor({5});
  on_cpu->backward_weights(x, dy, dk_cpu, &db_cpu);
  const Tensor dy_gpu = up(dy);
  on_gpu->backward_weights(x_gpu, dy_gpu, dk_gpu, &db_gpu);
  expect_close(dk_cpu, down(dk_gpu), 1e-4, "kernel gradient");
  expect_close(db_cpu, down(db_gpu), 1e-4, "bias gradient");
  Tensor dx_cpu, dx_gpu = gpu_->tensor();
  on_cpu->backward_data(dy, kernel, dx_cpu);
  on_gpu->backward_data(dy_gpu, k_gpu, dx_gpu);
  expect_close(dx_cpu, down(dx_gpu), 1e-4, "input gradient");
}

// Plain, and with the reading layer's relu absorbed (output max(0, ·), gradient masked by it);
// each without a mask, with a Keras mask of the rows (statistics over the kept rows) and with one
// keeping no row.
TEST_F(BackendOps, BatchNormFollowsTheCpu) {
  Tensor kept({40}), none({40});
  for (std::int64_t r = 0; r < 40; ++r) kept[r] = r % 4 == 2 || r > 33 ? 0.0f : 1.0f;
  none.fill(0.0f);
  for (const bool relu : {false, true})
    for (const Tensor* mask : std::initializer_list<const Tensor*>{nullptr, &kept, &none}) {
      SCOPED_TRACE(std::string(relu ? "relu absorbed" : "plain") + (mask == &kept ? ", masked"
                                                                    : mask        ? ", nothing kept"
                                                                                  : ""));
      const Tensor mask_gpu = mask ? up(*mask) : Tensor();
      const Tensor* kept_gpu = mask ? &mask_gpu : nullptr;
      const backend::BatchNormDesc desc{7, 0.9, 1e-3, true, true, relu};
      const Tensor x = random_host({40, 7}, 16, -2.0f, 3.0f);
      const Tensor gamma = random_host({7}, 17, 0.5f, 1.5f), beta = random_host({7}, 18);
      Tensor mm_cpu({7}), mv_cpu({7});
      mv_cpu.fill(1.0f);
      Tensor mm_gpu = up(mm_cpu), mv_gpu = up(mv_cpu);
      auto on_cpu = cpu().batch_norm(desc);
      auto on_gpu = gpu().batch_norm(desc);
      Tensor y_cpu({40, 7}), y_gpu = gpu_tensor({40, 7});
      const Tensor x_gpu = up(x), g_gpu = up(gamma), b_gpu = up(beta);
      on_cpu->forward_training(x, &gamma, &beta, mm_cpu, mv_cpu, y_cpu, {}, mask);
      on_gpu->forward_training(x_gpu, &g_gpu, &b_gpu, mm_gpu, mv_gpu, y_gpu, {}, kept_gpu);
      expect_same(y_cpu, down(y_gpu), "batch norm forward");
      expect_same(mm_cpu, down(mm_gpu), "moving mean");
      expect_same(mv_cpu, down(mv_gpu), "moving variance");
      const Tensor dy = random_host({40, 7}, 19);
      Tensor dg_cpu({7}), db_cpu({7}), dx_cpu({40, 7});
      Tensor dg_gpu = gpu_tensor({7}), db_gpu = gpu_tensor({7}), dx_gpu = gpu_tensor({40, 7});
      on_cpu->backward(x, y_cpu, dy, &gamma, &dg_cpu, &db_cpu, &dx_cpu, {}, mask);
      on_gpu->backward(x_gpu, y_gpu, up(dy), &g_gpu, &dg_gpu, &db_gpu, &dx_gpu, {}, kept_gpu);
      expect_same(dg_cpu, down(dg_gpu), "gamma gradient");
      expect_same(db_cpu, down(db_gpu), "beta gradient");
      expect_same(dx_cpu, down(dx_gpu), "input gradient");
    }
}

TEST_F(BackendOps, EmbeddingGatherAndGradientAreTheCpusAndBadIndicesAreFound) {
  const Tensor table = random_host({11, 4}, 20);
  Tensor x({3, 5});
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11);
  Tensor y_cpu({3, 5, 4}), y_gpu = gpu_tensor({3, 5, 4});
  EXPECT_FALSE(cpu().embedding_gather(table, x, y_cpu, 4));
  const Tensor x_gpu = up(x);
  EXPECT_FALSE(gpu().embedding_gather(up(table), x_gpu, y_gpu, 4));
  expect_same(y_cpu, down(y_gpu), "gather");
  const Tensor dy = random_host({3, 5, 4}, 21);
  Tensor g_cpu({11, 4}), g_gpu = gpu_tensor({11, 4});
  cpu().embedding_gradient(x, dy, g_cpu, 4);
  gpu().embedding_gradient(x_gpu, up(dy), g_gpu, 4);
  expect_same(g_cpu, down(g_gpu), "embedding gradient");
  x[6] = 11.0f;  // outside the table
  const auto bad = gpu().embedding_gather(up(table), up(x), y_gpu, 4);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->position, 6);
  EXPECT_EQ(bad->value, 11.0f);
  EXPECT_FALSE(gpu_->captured_safely());
}

// Discretization's bins (kernel_math's binary search on both) and the category encodings, to
// the bit; a bad category found at the CPU's position.
TEST_F(BackendOps, DiscretizeAndEncodeCategoriesFollowTheCpu) {
  Tensor x = random_host({6, 7, 3}, 31, -2.0f, 2.0f);
  const Tensor boundaries = Tensor::from_vector({5}, {-1.0f, -0.5f, 0.0f, 0.0f, 1.25f});
  for (std::int64_t i = 0; i < x.size(); i += 9) x[i] = boundaries[i % 5];  // on a boundary
  Tensor bins_cpu({6, 7, 3}), bins_gpu = gpu_tensor({6, 7, 3});
  cpu().discretize(x, boundaries, bins_cpu);
  gpu().discretize(up(x), up(boundaries), bins_gpu);
  expect_same(bins_cpu, down(bins_gpu), "discretize");
  for (const bool count : {false, true}) {  // [6, 7, 3] as [outer, n, inner], 6 categories
    Tensor y_cpu({6, 3, 6}), y_gpu = gpu_tensor({6, 3, 6});
    EXPECT_FALSE(cpu().encode_categories(bins_cpu, y_cpu, 7, 3, 6, count));
    EXPECT_FALSE(gpu().encode_categories(up(bins_cpu), y_gpu, 7, 3, 6, count));
    expect_same(y_cpu, down(y_gpu), count ? "count" : "multi_hot");
  }
  bins_cpu[40] = 6.0f;  // outside the 6 categories
  bins_cpu[50] = 2.5f;
  Tensor y_gpu = gpu_tensor({6, 3, 6});
  const auto bad = gpu().encode_categories(up(bins_cpu), y_gpu, 7, 3, 6, false);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->position, 40);
  EXPECT_EQ(bad->value, 6.0f);
}

// IntegerLookup's table (kernel_math's binary search on both): values found, truncated, in OOV
// buckets or missing, to the bit; the first missing key at the CPU's position.
TEST_F(BackendOps, LookupFollowsTheCpu) {
  Tensor x = random_host({5, 9}, 41, -20.0f, 20.0f);
  const Tensor keys = Tensor::from_vector({5}, {-7.0f, 0.0f, 3.0f, 4.0f, 12.0f});
  const Tensor values = Tensor::from_vector({5}, {5.0f, 6.0f, 7.0f, 8.0f, 9.0f});
  for (std::int64_t i = 0; i < x.size(); i += 4) x[i] = keys[i % 5] + 0.5f;  // found, truncated
  x[3] = std::nanf("");
  backend::math::LookupDesc desc;
  for (const std::int64_t buckets : {std::int64_t{0}, std::int64_t{3}}) {
    desc.missing = 1.0f;
    desc.buckets = buckets;
    desc.bucket_start = 2.0f;
    Tensor y_cpu({5, 9}), y_gpu = gpu_tensor({5, 9});
    EXPECT_FALSE(cpu().lookup(desc, x, keys, values, y_cpu));
    EXPECT_FALSE(gpu().lookup(desc, up(x), up(keys), up(values), y_gpu));
    expect_same(y_cpu, down(y_gpu), buckets ? "OOV buckets" : "one OOV index");
  }
  desc = {};
  desc.refuse_missing = true;
  Tensor y_cpu({5, 9}), y_gpu = gpu_tensor({5, 9});
  const auto bad_cpu = cpu().lookup(desc, x, keys, values, y_cpu);
  const auto bad_gpu = gpu().lookup(desc, up(x), up(keys), up(values), y_gpu);
  ASSERT_TRUE(bad_cpu);
  ASSERT_TRUE(bad_gpu);
  EXPECT_EQ(bad_gpu->position, bad_cpu->position);
  EXPECT_EQ(bad_gpu->value, bad_cpu->value);
  EXPECT_FALSE(gpu_->captured_safely());
}

TEST_F(BackendOps, LossAndMetricSumsFollowTheCpu) {
  const std::int64_t rows = 50, classes = 6;
  const Tensor logits = random_host({rows, classes}, 22, -3.0f, 3.0f);
  const Tensor weights = random_host({rows}, 25, 0.0f, 3.0f);
  Tensor labels({rows});
  for (std::int64_t r = 0; r < rows; ++r) labels[r] = static_cast<float>(r % classes);
  backend::LossDesc loss;
  loss.kind = backend::LossDesc::Kind::scce;
  loss.from_logits = true;
  backend::MetricDesc metric;
  metric.kind = backend::MetricDesc::Kind::sparse_categorical_accuracy;
  const Tensor logits_gpu = up(logits), labels_gpu = up(labels), weights_gpu = up(weights);
  // A masked output's view of the same values: 10 rows of 5 positions, 0/1 position weights
  // scaled as Objective scales a mask, and 10 row weights.
  Tensor mask({10, 5});
  for (std::int64_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 == 1 ? 0.0f : 1.6f;
  const Tensor mask_gpu = up(mask), row_weights = random_host({10}, 28, 0.0f, 3.0f);
  const Tensor row_weights_gpu = up(row_weights);
  struct Case {
    const char* what;
    std::int64_t positions;
    backend::WeightTensors cpu, gpu;
    bool ignore_class_2 = false;
  };
  for (const Case& k :
       {Case{"unweighted", 1, {}, {}}, Case{"weighted", 1, {&weights}, {&weights_gpu}},
        Case{"masked positions", 5, {nullptr, &mask}, {nullptr, &mask_gpu}},
        Case{"weighted, masked", 5, {&row_weights, &mask}, {&row_weights_gpu, &mask_gpu}},
        Case{"class 2 ignored", 5, {nullptr, &mask}, {nullptr, &mask_gpu}, true}}) {
    SCOPED_TRACE(k.what);
    loss.positions = metric.positions = k.positions;
    loss.ignores_class = k.ignore_class_2;
    loss.ignore_class = 2;
    const std::int64_t cols = classes * k.positions;
    auto sums_cpu = cpu().sums();
    auto sums_gpu = gpu().sums();
    sums_cpu->reset(2);
    sums_gpu->reset(2);
    Tensor grad_cpu, grad_gpu = gpu_->tensor();
    cpu().loss_sum(loss, logits, labels, k.cpu, cols, 0.02f, &grad_cpu, *sums_cpu, 0);
    cpu().metric_sum(metric, logits, labels, k.cpu, cols, *sums_cpu, 1);
    gpu().loss_sum(loss, logits_gpu, labels_gpu, k.gpu, cols, 0.02f, &grad_gpu, *sums_gpu, 0);
    gpu().metric_sum(metric, logits_gpu, labels_gpu, k.gpu, cols, *sums_gpu, 1);
    const auto c = sums_cpu->read(), g = sums_gpu->read();
    EXPECT_NEAR(g[0], c[0], 1e-6 * std::fabs(c[0]));
    EXPECT_NEAR(g[1], c[1], 1e-6 * std::fabs(c[1]));
    expect_close(grad_cpu, down(grad_gpu), 1e-6, "loss gradient");
  }
}

TEST_F(BackendOps, MetricHistogramsAreTheCpusBitForBit) {
  const std::int64_t rows = 70, classes = 4;
  const Tensor scores = random_host({rows, classes}, 26, -0.2f, 1.2f);  // some clipped
  const Tensor weights = random_host({rows}, 27, 0.0f, 2.0f);
  Tensor one_hot({rows, classes}), labels({rows});
  for (std::int64_t r = 0; r < rows; ++r) {
    labels[r] = static_cast<float>((r * 7) % classes);
    one_hot[r * classes + (r * 7) % classes] = 1.0f;
  }
  backend::MetricDesc auc;
  auc.kind = backend::MetricDesc::Kind::auc_buckets;
  auc.bins = 200;
  backend::MetricDesc logits_auc = auc;
  logits_auc.from_logits = true;
  backend::MetricDesc iou;
  iou.kind = backend::MetricDesc::Kind::confusion_matrix;
  iou.bins = static_cast<int>(classes);
  iou.ignore_class = 2;
  const Tensor scores_gpu = up(scores), weights_gpu = up(weights), one_hot_gpu = up(one_hot),
               labels_gpu = up(labels);
  struct Case {
    const char* what;
    backend::MetricDesc desc;
    const Tensor *target, *target_gpu;
  };
  for (const Case& c : {Case{"auc", auc, &one_hot, &one_hot_gpu},
                        Case{"auc from logits", logits_auc, &one_hot, &one_hot_gpu},
                        Case{"confusion matrix", iou, &labels, &labels_gpu}})
    for (const bool weighted : {false, true}) {
      SCOPED_TRACE(std::string(c.what) + (weighted ? ", weighted" : ""));
      const std::size_t bins = static_cast<std::size_t>(backend::math::histogram_bins(c.desc));
      auto sums_cpu = cpu().sums();
      auto sums_gpu = gpu().sums();
      sums_cpu->reset(bins + 1);
      sums_gpu->reset(bins + 1);
      cpu().metric_histogram(c.desc, scores, *c.target, {weighted ? &weights : nullptr}, classes,
                             *sums_cpu, 1);
      gpu().metric_histogram(c.desc, scores_gpu, *c.target_gpu, {weighted ? &weights_gpu : nullptr},
                             classes, *sums_gpu, 1);
      const auto cpu_bins = sums_cpu->read();
      EXPECT_EQ(sums_gpu->read(), cpu_bins);
      double total = 0;
      for (double v : cpu_bins) total += v;
      EXPECT_GT(total, 0);  // not two empty histograms
    }
}

TEST_F(BackendOps, UniformDrawsAndFlipsAreTheCpusBitForBit) {
  backend::DropoutDesc d;
  d.stream = 77;
  d.call = 3;
  d.first_sample = 40;
  Tensor draws_cpu({9, 2});
  Tensor draws_gpu = gpu_tensor({9, 2});
  cpu().uniform_noise(d, draws_cpu, 2);
  gpu().uniform_noise(d, draws_gpu, 2);
  const Tensor draws = down(draws_gpu);
  for (std::int64_t i = 0; i < draws.size(); ++i) ASSERT_EQ(draws[i], draws_cpu[i]) << i;
  backend::FlipDesc flip{9, 5, 4, 3, true, true};
  const Tensor x = random_host({9, 5, 4, 3}, 28);
  Tensor y_cpu({9, 5, 4, 3});
  Tensor y_gpu = gpu_tensor({9, 5, 4, 3});
  cpu().flip_images(flip, draws_cpu, x, y_cpu);
  gpu().flip_images(flip, draws_gpu, up(x), y_gpu);
  const Tensor y = down(y_gpu);
  for (std::int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], y_cpu[i]) << i;
}

// Warps and colour adjustments (Keras' preprocessing layers) and their gradients: the CPU's
// bits, except rotations, whose cos and sin are the device's own (within float rounding).
TEST_F(BackendOps, ImageWarpsAndAdjustmentsAreTheCpus) {
  const Tensor x = random_host({5, 7, 6, 3}, 31);
  const Tensor u = random_host({5, backend::WarpDesc::kDraws}, 32, 0.0f, 1.0f);
  for (int kind : {backend::WarpDesc::translate, backend::WarpDesc::rotate, backend::WarpDesc::zoom,
                   backend::WarpDesc::crop}) {
    backend::WarpDesc d;
    d.kind = kind;
    d.batch = 5;
    d.rows = d.src_rows = 7;
    d.cols = d.src_cols = 6;
    d.channels = 3;
    d.out_rows = kind == backend::WarpDesc::crop ? 4 : 7;
    d.out_cols = kind == backend::WarpDesc::crop ? 5 : 6;
    d.lo0 = d.lo1 = -0.3f;
    d.hi0 = d.hi1 = 0.3f;
    const Shape out{5, d.out_rows, d.out_cols, 3};
    Tensor y_cpu(out), y_gpu = gpu_tensor(out), dx_cpu(x.shape()), dx_gpu = gpu_tensor(x.shape());
    const Tensor g = random_host(out, 33);
    cpu().warp_images(d, u, x, y_cpu);
    gpu().warp_images(d, up(u), up(x), y_gpu);
    cpu().warp_images_backward(d, u, g, dx_cpu);
    gpu().warp_images_backward(d, up(u), up(g), dx_gpu);
    const Tensor y = down(y_gpu), dx = down(dx_gpu);
    const float tolerance = kind == backend::WarpDesc::rotate ? 1e-5f : 0.0f;
    for (std::int64_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], y_cpu[i], tolerance) << kind << " " << i;
    for (std::int64_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(dx[i], dx_cpu[i], tolerance) << kind << " " << i;
  }
  const Tensor pixels = random_host({5, 7, 6, 3}, 34, 0.0f, 1.0f);
  const Tensor one = random_host({5, 1}, 35, 0.0f, 1.0f);
  for (int kind : {backend::AdjustDesc::contrast, backend::AdjustDesc::brightness}) {
    backend::AdjustDesc d{5, 7, 6, 3, kind, 0.5f, 1.5f, 0.1f, 0.9f};
    Tensor y_cpu(pixels.shape()), m_cpu({5, 3}), dx_cpu(pixels.shape());
    Tensor y_gpu = gpu_tensor(pixels.shape()), m_gpu = gpu_tensor({5, 3}),
           dx_gpu = gpu_tensor(pixels.shape());
    const Tensor g = random_host(pixels.shape(), 36);
    cpu().adjust_images(d, one, pixels, m_cpu, y_cpu);
    gpu().adjust_images(d, up(one), up(pixels), m_gpu, y_gpu);
    cpu().adjust_images_backward(d, one, pixels, m_cpu, g, dx_cpu);
    gpu().adjust_images_backward(d, up(one), up(pixels), m_gpu, up(g), dx_gpu);
    const Tensor y = down(y_gpu), dx = down(dx_gpu);
    for (std::int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], y_cpu[i]) << kind << " " << i;
    for (std::int64_t i = 0; i < dx.size(); ++i) ASSERT_EQ(dx[i], dx_cpu[i]) << kind << " " << i;
  }
}

TEST_F(BackendOps, OptimizerStepsAreTheCpusBitForBit) {
  backend::OptimizerDesc adam;
  adam.kind = backend::OptimizerDesc::Kind::adam;
  adam.weight_decay = 0.01;
  adam.clipnorm = 0.5;
  // tf.keras 2's moving average: started from the weights at step 1, written into them at step 3.
  adam.use_ema = true;
  adam.ema_keras2 = true;
  adam.ema_momentum = 0.7;
  adam.ema_overwrite_frequency = 3;
  // Two parameter tensors in one flat layout (as a CUDA replica keeps them) and on the host.
  const Tensor w = random_host({96}, 23), g = random_host({96}, 24);
  Tensor w_cpu = w.clone();
  std::vector<Tensor> parts_cpu{Tensor::view(w_cpu, 0, {64}), Tensor::view(w_cpu, 64, {32})};
  const std::vector<Tensor> grads_cpu{Tensor::view(g, 0, {64}), Tensor::view(g, 64, {32})};
  std::vector<std::vector<Tensor>> slots_cpu{{Tensor({64}), Tensor({64}), Tensor({64})},
                                             {Tensor({32}), Tensor({32}), Tensor({32})}};
  Tensor w_gpu = up(w), g_gpu = up(g), m_gpu = gpu_tensor({96}), v_gpu = gpu_tensor({96}),
         a_gpu = gpu_tensor({96});
  gpu().fill(m_gpu, 0.0f);
  gpu().fill(v_gpu, 0.0f);
  gpu().fill(a_gpu, 0.0f);
  std::vector<Tensor> parts_gpu{Tensor::view(w_gpu, 0, {64}), Tensor::view(w_gpu, 64, {32})};
  const std::vector<Tensor> grads_gpu{Tensor::view(g_gpu, 0, {64}), Tensor::view(g_gpu, 64, {32})};
  std::vector<std::vector<Tensor>> slots_gpu{
      {Tensor::view(m_gpu, 0, {64}), Tensor::view(v_gpu, 0, {64}), Tensor::view(a_gpu, 0, {64})},
      {Tensor::view(m_gpu, 64, {32}), Tensor::view(v_gpu, 64, {32}),
       Tensor::view(a_gpu, 64, {32})}};
  for (std::int64_t step = 1; step <= 3; ++step) {
    std::vector<backend::UpdateTensors> on_cpu, on_gpu;
    for (std::size_t i = 0; i < 2; ++i) {
      on_cpu.push_back({&parts_cpu[i], &grads_cpu[i], &slots_cpu[i]});
      on_gpu.push_back({&parts_gpu[i], &grads_gpu[i], &slots_gpu[i]});
    }
    cpu().optimizer_update(adam, step, 0.01, on_cpu);
    gpu().optimizer_update(adam, step, 0.01, on_gpu);
  }
  expect_same(w_cpu, down(w_gpu), "weights after three Adam steps");
  for (std::size_t i = 0; i < 2; ++i)
    expect_same(slots_cpu[i][2], down(slots_gpu[i][2]), "moving averages");
}

// Dynamic loss scaling's one pass over the gradients: the same bits as the CPU, and an Inf or NaN
// anywhere (the flag is set by whichever thread saw it) answers false.
TEST_F(BackendOps, ScaleCheckingFiniteIsTheCpusAndFindsEveryNonFiniteValue) {
  const Tensor g = random_host({300'001}, 31, -1e4f, 1e4f);
  Tensor on_cpu = g.clone();
  Tensor on_gpu = up(g);
  EXPECT_TRUE(cpu().scale_checking_finite(on_cpu, 1.0f / 1024));
  EXPECT_TRUE(gpu().scale_checking_finite(on_gpu, 1.0f / 1024));
  expect_same(on_cpu, down(on_gpu), "unscaled gradients");
  for (std::int64_t at : {std::int64_t{0}, std::int64_t{150'000}, std::int64_t{300'000}})
    for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
      Tensor h = g.clone();
      h[at] = bad;
      Tensor d = up(h);
      EXPECT_FALSE(gpu().scale_checking_finite(d, 0.5f)) << at;
    }
}

// The bf16 CUDA backend against the CPU's bf16 backend (the same operands, rounded to nearest
// even, summed in float32 in another order): GEMMs, Dense's three products (DenseProducts) and
// a convolution on the im2col path. The convolution's bias gradient is the one exception: oneDNN
// sums the rounded output gradient, the im2col path the float32 one (bfloat16's 2^-9 relative
// per term).
TEST_F(BackendOps, Bf16ProductsAndConvolutionsFollowTheCpusBf16) {
  if (const std::string why = backend::cpu_precision_unavailable(Precision::bf16); !why.empty())
    GTEST_SKIP() << "no CPU reference: " << why;
  cuda::DenseGemm gemm(*allocator_, stream_->get(), cuda::Precision::bf16);
  cuda::CudaBackend bf16(allocator_, stream_->get(), gemm, cuda::Precision::bf16);
  backend::Backend& cpu16 = backend::cpu_backend(Precision::bf16);
  const std::int64_t m = 64, n = 48, k = 96;
  const Tensor a = random_host({m, k}, 41), b = random_host({k, n}, 42);
  const Tensor bias = random_host({n}, 43);
  const backend::GemmDesc forward{false, false, m, n, k, backend::GemmEpilogue::relu_bias};
  Tensor c_cpu({m, n}), c_gpu = bf16.tensor({m, n});
  const Tensor bias_gpu = up(bias);
  cpu16.gemm(forward, a, b, &bias, c_cpu);
  bf16.gemm(forward, up(a), up(b), &bias_gpu, c_gpu);
  expect_close(c_cpu, down(c_gpu), 1e-5, "bf16 forward GEMM");
  const Tensor g = random_host({m, n}, 44);
  Tensor dw_cpu({k, n}), dw_gpu = bf16.tensor({k, n});
  cpu16.gemm({true, false, k, n, m}, a, g, nullptr, dw_cpu);
  bf16.gemm({true, false, k, n, m}, up(a), up(g), nullptr, dw_gpu);
  expect_close(dw_cpu, down(dw_gpu), 1e-5, "bf16 weights GEMM");
  // The same three products as Dense makes them (the CPU's kept, transposed roundings).
  const backend::DenseProductDesc dense{k, n, backend::GemmEpilogue::relu_bias};
  auto dense_cpu = cpu16.dense_products(dense);
  auto dense_gpu = bf16.dense_products(dense);
  const Tensor a_gpu = up(a), b_gpu = up(b);
  Tensor y_dense_cpu({m, n}), y_dense_gpu = bf16.tensor({m, n});
  dense_cpu->forward(a, b, &bias, y_dense_cpu);
  dense_gpu->forward(a_gpu, b_gpu, &bias_gpu, y_dense_gpu);
  expect_close(y_dense_cpu, down(y_dense_gpu), 1e-5, "bf16 dense forward");
  Tensor dk_dense_cpu({k, n}), dx_dense_cpu({m, k});
  Tensor dk_dense_gpu = bf16.tensor({k, n}), dx_dense_gpu = bf16.tensor({m, k});
  dense_cpu->backward(a, g, b, &dk_dense_cpu, &dx_dense_cpu);
  dense_gpu->backward(a_gpu, up(g), b_gpu, &dk_dense_gpu, &dx_dense_gpu);
  expect_close(dk_dense_cpu, down(dk_dense_gpu), 1e-5, "bf16 dense kernel gradient");
  expect_close(dx_dense_cpu, down(dx_dense_gpu), 1e-5, "bf16 dense input gradient");

  backend::ConvolutionDesc desc;
  desc.label = "bf16 convolution test";
  desc.geometry = {{12, 12, 3, 1, 1, 1}, {10, 10, 3, 1, 1, 1}, 8};  // SAME 3x3, 8 channels
  desc.filters = 16;
  const Tensor x = random_host({4, 12, 10, 8}, 45);
  const Tensor kernel = random_host({3, 3, 8, 16}, 46), kbias = random_host({16}, 47);
  auto on_cpu = cpu16.convolution(desc);
  auto on_gpu = bf16.convolution(desc);
  const Tensor x_gpu = up(x), k_gpu = up(kernel), kb_gpu = up(kbias);
  Tensor y_cpu, y_gpu = bf16.tensor();
  on_cpu->forward(x, kernel, &kbias, y_cpu);
  on_gpu->forward(x_gpu, k_gpu, &kb_gpu, y_gpu);
  expect_close(y_cpu, down(y_gpu), 1e-5, "bf16 convolution");
  const Tensor dy = random_host(y_cpu.shape(), 48);
  Tensor dk_cpu(kernel.shape()), db_cpu({16}), dx_cpu;
  Tensor dk_gpu = bf16.tensor(kernel.shape()), db_gpu = bf16.tensor({16}), dx_gpu = bf16.tensor();
  on_cpu->backward(x, dy, kernel, dk_cpu, &db_cpu, &dx_cpu);
  on_gpu->backward(x_gpu, up(dy), k_gpu, dk_gpu, &db_gpu, &dx_gpu);
  expect_close(dk_cpu, down(dk_gpu), 1e-5, "bf16 kernel gradient");
  expect_close(dx_cpu, down(dx_gpu), 1e-5, "bf16 input gradient");
  expect_close(db_cpu, down(db_gpu), 1e-2, "bias gradient (rounded and float32 sums)");
}

}  // namespace
}  // namespace tandem
