// Conv2D on cuDNN (label "gpu"), in two parts.
//
// CudnnConvolution itself (core/src/cuda/ops/cudnn_convolution.hpp) against references computed
// here in double on the CPU: forward, backward data and backward filter for several geometries
// (valid and SAME padding, strides, dilation, 1x1, many channels) within 1e-5 of the largest
// reference value in fp32 and 3e-3 in tf32; reruns bit-identical, and outputs overwritten (beta 0);
// asymmetric padding refused (that check needs no GPU).
//
// The Conv2D layer of the CUDA replica through the public ReplicaModel, with TANDEM_CONV2D set
// while the replica builds its layers: the cuDNN path against the im2col path and against the CPU
// layer (nn::Conv2D) - the forward output, and the gradients of the kernel, of the bias and of the
// layer's input. The input gradient is observed through a probe: the model's first layer is a
// Dense without bias fed one-hot samples, so its kernel's row i is sample i's Conv2D input and its
// kernel gradient's row i is dL/d(that input). Gradients are read from one SGD step with a large
// power-of-two learning rate: g = (w_before - w_after) / lr, the step dwarfing the weights. Then:
// TANDEM_CONV2D=cudnn on a geometry cuDNN cannot express, and a value that is not a path, are
// ConfigErrors; a few training steps on cuDNN, captured in CUDA graphs, follow the CPU.
//
// Skipped without a usable CUDA device (and, for the second part, without the CUDA module).
// Needs tandem_core (ReplicaModel, like cuda_replica_test.cpp) and tandem_cuda_ops
// (CudnnConvolution, like cuda_ops_test.cpp).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/cudnn_convolution.hpp"
#include "cuda/ops/device_allocator.hpp"
#include "gpu/device_scratch.hpp"
#include "gpu/gpu_test_support.hpp"
#include "gpu/replica_test_support.hpp"
#include "tandem/devices.hpp"
#include "tandem/error.hpp"
#include "parallel/replica_model.hpp"

namespace {

using tandem::gpu_test::random_vector;
using tandem::gpu_test::relative_error;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

// ---- CudnnConvolution --------------------------------------------------------------------------

namespace tandem::cuda {
namespace {

using Geometry = CudnnConvolution::Geometry;

// A square kernel with the same stride, dilation and (symmetric) padding along both axes.
Geometry geometry(std::int64_t rows, std::int64_t cols, std::int64_t channels, std::int64_t kernel,
                  std::int64_t filters, std::int64_t stride, std::int64_t dilation,
                  std::int64_t pad) {
  Geometry g;
  g.in_rows = rows;
  g.in_cols = cols;
  g.in_channels = channels;
  g.kernel_rows = g.kernel_cols = kernel;
  g.filters = filters;
  g.stride_rows = g.stride_cols = stride;
  g.dilation_rows = g.dilation_cols = dilation;
  g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = pad;
  return g;
}

struct DirectCase {
  std::string name;
  Geometry g;
};

void PrintTo(const DirectCase& c, std::ostream* os) {
  *os << c.name;
}

std::vector<DirectCase> direct_cases() {
  return {
      {"valid_3x3", geometry(9, 8, 3, 3, 4, 1, 1, 0)},
      {"same_3x3", geometry(8, 7, 3, 3, 5, 1, 1, 1)},          // TensorFlow SAME, stride 1
      {"dilated_5x5_same", geometry(9, 8, 2, 5, 3, 1, 2, 4)},  // span 9: SAME pads 4 and 4
      {"pointwise_1x1", geometry(6, 5, 7, 1, 6, 1, 1, 0)},
      {"strided_2_valid", geometry(11, 10, 3, 3, 4, 2, 1, 0)},
      {"multichannel_same", geometry(7, 7, 16, 3, 8, 1, 1, 1)},
  };
}

// The three operations in double, NHWC activations and a KRSC filter, by direct summation.
struct Reference {
  std::vector<double> y, dx, dw;
};

Reference reference(const Geometry& g, std::int64_t batch, const std::vector<float>& x,
                    const std::vector<float>& w, const std::vector<float>& dy) {
  const std::int64_t H = g.in_rows, W = g.in_cols, C = g.in_channels, F = g.filters;
  const std::int64_t KH = g.kernel_rows, KW = g.kernel_cols;
  const std::int64_t OH = g.out_rows(), OW = g.out_cols();
  Reference r;
  r.y.assign(static_cast<std::size_t>(batch * OH * OW * F), 0.0);
  r.dx.assign(static_cast<std::size_t>(batch * H * W * C), 0.0);
  r.dw.assign(static_cast<std::size_t>(F * KH * KW * C), 0.0);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oy = 0; oy < OH; ++oy)
      for (std::int64_t ox = 0; ox < OW; ++ox)
        for (std::int64_t f = 0; f < F; ++f) {
          const auto yi = static_cast<std::size_t>(((b * OH + oy) * OW + ox) * F + f);
          const double d = dy[yi];
          double s = 0;
          for (std::int64_t ky = 0; ky < KH; ++ky) {
            const std::int64_t iy = oy * g.stride_rows - g.pad_top + ky * g.dilation_rows;
            if (iy < 0 || iy >= H) continue;
            for (std::int64_t kx = 0; kx < KW; ++kx) {
              const std::int64_t ix = ox * g.stride_cols - g.pad_left + kx * g.dilation_cols;
              if (ix < 0 || ix >= W) continue;
              for (std::int64_t c = 0; c < C; ++c) {
                const auto xi = static_cast<std::size_t>(((b * H + iy) * W + ix) * C + c);
                const auto wi = static_cast<std::size_t>(((f * KH + ky) * KW + kx) * C + c);
                s += static_cast<double>(x[xi]) * w[wi];
                r.dx[xi] += d * w[wi];
                r.dw[wi] += d * x[xi];
              }
            }
          }
          r.y[yi] = s;
        }
  return r;
}

// A stream and an allocator of its own; device buffers from host vectors and back.
using CudnnDevice = gpu_test::DeviceScratch;

std::size_t count(std::int64_t n) {
  return static_cast<std::size_t>(n);
}

// Asymmetric padding - TensorFlow's SAME with an even kernel, or with a stride that leaves a row
// over - is refused with the reason; the symmetric geometries of the tests are taken. Pure
// arithmetic: runs without a GPU.
TEST(CudnnConvolutionGeometry, RefusesAsymmetricPaddingOnly) {
  Geometry even = geometry(7, 7, 2, 2, 3, 1, 1, 0);  // 2x2 SAME: pads 0 before, 1 after
  even.pad_bottom = even.pad_right = 1;
  EXPECT_FALSE(CudnnConvolution::supports(even));
  EXPECT_NE(CudnnConvolution::unsupported_reason(even).find("both sides"), std::string::npos)
      << CudnnConvolution::unsupported_reason(even);
  Geometry strided = geometry(8, 8, 3, 3, 4, 2, 1, 0);  // 3x3 SAME stride 2 on 8: pads 0 and 1
  strided.pad_bottom = strided.pad_right = 1;
  EXPECT_FALSE(CudnnConvolution::supports(strided));
  for (const DirectCase& c : direct_cases())
    EXPECT_TRUE(CudnnConvolution::supports(c.g))
        << c.name << ": " << CudnnConvolution::unsupported_reason(c.g);
  const Geometry g = geometry(8, 7, 3, 3, 5, 1, 1, 1);
  EXPECT_EQ(g.out_rows(), 8);
  EXPECT_EQ(g.out_cols(), 7);
  EXPECT_EQ(CudnnConvolution::max_batch(g), INT_MAX / (8 * 7 * 5));
}

class CudnnConvolutionCase : public ::testing::TestWithParam<DirectCase> {};

// Forward, backward data and backward filter against the double reference, at both precisions;
// then a second batch size on the same object (its own algorithm search).
TEST_P(CudnnConvolutionCase, MatchesTheReference) {
  REQUIRE_DEVICE();
  const Geometry& g = GetParam().g;
  const std::int64_t batch = 5, few = 2;
  const std::int64_t x_size = batch * g.in_rows * g.in_cols * g.in_channels;
  const std::int64_t y_size = batch * g.out_rows() * g.out_cols() * g.filters;
  const std::int64_t w_size = g.filters * g.kernel_rows * g.kernel_cols * g.in_channels;
  const auto x = random_vector(count(x_size), 1), w = random_vector(count(w_size), 2),
             dy = random_vector(count(y_size), 3);
  const Reference want = reference(g, batch, x, w, dy);
  for (Precision precision : {Precision::fp32, Precision::tf32}) {
    SCOPED_TRACE(precision == Precision::fp32 ? "fp32" : "tf32");
    const double tolerance = precision == Precision::fp32 ? 1e-5 : 3e-3;
    CudnnDevice dev;
    CudnnConvolution conv(g, dev.allocator(), dev.stream(), precision);
    float *dx_ = dev.upload(x), *dw_ = dev.upload(w), *ddy = dev.upload(dy);
    float* y = dev.filled(count(y_size), 0.0f);
    float* gx = dev.filled(count(x_size), 0.0f);
    float* gw = dev.filled(count(w_size), 0.0f);
    conv.forward(dx_, dw_, y, batch);
    conv.backward_data(ddy, dw_, gx, batch);
    conv.backward_filter(dx_, ddy, gw, batch);
    EXPECT_LE(relative_error(dev.download(y, count(y_size)), want.y), tolerance) << "forward";
    EXPECT_LE(relative_error(dev.download(gx, count(x_size)), want.dx), tolerance) << "dx";
    EXPECT_LE(relative_error(dev.download(gw, count(w_size)), want.dw), tolerance) << "dw";
    EXPECT_TRUE(conv.forward_searched(batch));
    EXPECT_TRUE(conv.backward_searched(batch));
    EXPECT_GE(conv.forward_ms(batch), 0.0f) << conv.choices(batch);

    // The first `few` samples: another batch size, searched on its first call.
    const std::int64_t few_y = few * g.out_rows() * g.out_cols() * g.filters;
    float* y_few = dev.filled(count(few_y), 0.0f);
    conv.forward(dx_, dw_, y_few, few);
    const std::vector<double> want_few(want.y.begin(), want.y.begin() + few_y);
    EXPECT_LE(relative_error(dev.download(y_few, count(few_y)), want_few), tolerance)
        << "forward of " << few << " samples";
  }
}

INSTANTIATE_TEST_SUITE_P(Geometries, CudnnConvolutionCase, ::testing::ValuesIn(direct_cases()),
                         [](const auto& info) { return info.param.name; });

// Each operation run twice gives the same bits (only deterministic algorithms), and overwrites
// its output (beta 0: a NaN left there does not leak in).
TEST(CudnnConvolutionDevice, RerunsAreBitIdenticalAndOverwrite) {
  REQUIRE_DEVICE();
  const Geometry g = geometry(12, 12, 16, 3, 32, 1, 1, 1);
  const std::int64_t batch = 16;
  const std::int64_t x_size = batch * g.in_rows * g.in_cols * g.in_channels;
  const std::int64_t y_size = batch * g.out_rows() * g.out_cols() * g.filters;
  const std::int64_t w_size = g.filters * g.kernel_rows * g.kernel_cols * g.in_channels;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Precision precision : {Precision::fp32, Precision::tf32}) {
    SCOPED_TRACE(precision == Precision::fp32 ? "fp32" : "tf32");
    CudnnDevice dev;
    CudnnConvolution conv(g, dev.allocator(), dev.stream(), precision);
    float* x = dev.upload(random_vector(count(x_size), 11));
    float* w = dev.upload(random_vector(count(w_size), 12));
    float* dy = dev.upload(random_vector(count(y_size), 13));
    float *y1 = dev.filled(count(y_size), nan), *y2 = dev.filled(count(y_size), nan);
    float *dx1 = dev.filled(count(x_size), nan), *dx2 = dev.filled(count(x_size), nan);
    float *dw1 = dev.filled(count(w_size), nan), *dw2 = dev.filled(count(w_size), nan);
    conv.forward(x, w, y1, batch);
    conv.backward_data(dy, w, dx1, batch);
    conv.backward_filter(x, dy, dw1, batch);
    conv.forward(x, w, y2, batch);
    conv.backward_data(dy, w, dx2, batch);
    conv.backward_filter(x, dy, dw2, batch);
    const auto h_y1 = dev.download(y1, count(y_size)), h_dx1 = dev.download(dx1, count(x_size)),
               h_dw1 = dev.download(dw1, count(w_size));
    EXPECT_TRUE(same_bits(h_y1, dev.download(y2, count(y_size)))) << "forward";
    EXPECT_TRUE(same_bits(h_dx1, dev.download(dx2, count(x_size)))) << "backward data";
    EXPECT_TRUE(same_bits(h_dw1, dev.download(dw2, count(w_size)))) << "backward filter";
    for (const auto* v : {&h_y1, &h_dx1, &h_dw1})
      EXPECT_TRUE(std::all_of(v->begin(), v->end(), [](float f) { return std::isfinite(f); }));
  }
}

// A geometry that is not supported is refused when built, with the reason.
TEST(CudnnConvolutionDevice, AsymmetricPaddingIsRefusedWhenBuilt) {
  REQUIRE_DEVICE();
  Geometry even = geometry(7, 7, 2, 2, 3, 1, 1, 0);
  even.pad_bottom = even.pad_right = 1;
  CudnnDevice dev;
  try {
    CudnnConvolution conv(even, dev.allocator(), dev.stream(), Precision::fp32);
    FAIL() << "no error";
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("both sides"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::cuda

// ---- The Conv2D layer on cuDNN through ReplicaModel ------------------------------------------

namespace tandem {
namespace {

using nlohmann::json;

constexpr const char* kPathVariable = "TANDEM_CONV2D";

// TANDEM_CONV2D for the layers built while it lives ("" leaves it unset); unset after.
class ScopedConv2DPath {
 public:
  explicit ScopedConv2DPath(const std::string& value) {
    if (value.empty())
      unsetenv(kPathVariable);
    else
      setenv(kPathVariable, value.c_str(), 1);
  }
  ~ScopedConv2DPath() { unsetenv(kPathVariable); }
  ScopedConv2DPath(const ScopedConv2DPath&) = delete;
  ScopedConv2DPath& operator=(const ScopedConv2DPath&) = delete;
};

using gpu_test::layer;
using gpu_test::plan;
using gpu_test::sequential;

// A model from `config` (weights from seed 7), its optimizer and a mean squared error, on
// `devices` (replica_test::Side), the replica built with TANDEM_CONV2D = `path`.
struct ConvSide : replica_test::Side {
  ConvSide(const json& model_config, const json& optimizer_config, const std::string& devices,
           Precision precision, const std::string& path)
      : ConvSide(std::make_unique<ScopedConv2DPath>(path), model_config, optimizer_config,
                 devices, precision) {}

 private:
  // `scoped` keeps the path set until the Side is built.
  ConvSide(std::unique_ptr<ScopedConv2DPath> /*scoped*/, const json& model_config,
           const json& optimizer_config, const std::string& devices, Precision precision)
      : Side(model_config, optimizer_config, replica_test::loss_spec("MeanSquaredError"),
             json::array(), devices, precision) {}
};

struct ConvCase {
  std::string name;
  Shape input;       // per sample (rows, cols, channels)
  json conv;         // the Conv2D's config
  bool tf32 = true;  // relu's kink flips under tf32's rounding near 0: compared in fp32 only
};

void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << c.name;
}

std::vector<ConvCase> conv_cases() {
  return {
      {"valid_3x3", {9, 8, 3}, {{"filters", 4}, {"kernel_size", {3, 3}}}},
      {"same_3x3_relu",
       {8, 7, 3},
       {{"filters", 5}, {"kernel_size", 3}, {"padding", "same"}, {"activation", "relu"}},
       false},
      {"dilated_5x5_same_tanh",
       {9, 8, 2},
       {{"filters", 3},
        {"kernel_size", 5},
        {"dilation_rate", 2},
        {"padding", "same"},
        {"activation", "tanh"}}},
      {"pointwise_1x1_without_bias",
       {6, 5, 7},
       {{"filters", 6}, {"kernel_size", 1}, {"use_bias", false}}},
      {"strided_2_valid", {11, 10, 3}, {{"filters", 4}, {"kernel_size", 3}, {"strides", 2}}},
      {"multichannel_same_sigmoid",
       {7, 7, 16},
       {{"filters", 8}, {"kernel_size", 3}, {"padding", "same"}, {"activation", "sigmoid"}}},
  };
}

constexpr std::int64_t kSamples = 8;
constexpr double kLearningRate = 4096;  // a power of two: lr * g is exact in float

// probe (Dense without bias over one-hot samples) -> Reshape to the Conv2D's input -> Conv2D ->
// Flatten: the output is the Conv2D's, the probe's kernel gradient its input gradient.
json probe_model(const ConvCase& c) {
  json conv = c.conv;
  conv["name"] = "conv";
  return sequential(
      {kSamples},
      json::array({layer("Dense", {{"name", "probe"},
                                   {"units", c.input[0] * c.input[1] * c.input[2]},
                                   {"use_bias", false}}),
                   layer("Reshape", {{"name", "reshape"},
                                     {"target_shape", {c.input[0], c.input[1], c.input[2]}}}),
                   layer("Conv2D", conv), layer("Flatten", {{"name", "flatten"}})}));
}

std::vector<std::vector<float>> weights(Model& m) {
  std::vector<std::vector<float>> w;
  for (Parameter* p : m.parameters())
    w.emplace_back(p->value.data(), p->value.data() + p->value.size());
  return w;
}

// The first `n` one-hot samples.
Tensor one_hot(std::int64_t n) {
  Tensor x({n, kSamples});
  for (std::int64_t i = 0; i < n; ++i) x[i * kSamples + i] = 1.0f;
  return x;
}

// What one side computes: the outputs for all samples and for the first 3 (another batch size),
// and every parameter's gradient (probe/kernel: dL/d(Conv2D input); conv/kernel; conv/bias).
struct Observed {
  std::vector<float> outputs, few_outputs;
  std::vector<std::vector<double>> gradients;
  std::vector<std::string> names;
};

Observed observe(const ConvCase& c, const std::string& devices, Precision precision,
                 const std::string& path) {
  const json sgd = {{"class_name", "SGD"}, {"config", {{"learning_rate", kLearningRate}}}};
  ConvSide side(probe_model(c), sgd, devices, precision, path);
  const std::int64_t out = shape_size(side.model->output_shape());
  Batch b;
  b.x = one_hot(kSamples);
  b.y = Tensor({kSamples, out});
  const auto targets = random_vector(static_cast<std::size_t>(kSamples * out), 5);
  std::copy(targets.begin(), targets.end(), b.y.data());

  Observed o;
  o.outputs.resize(static_cast<std::size_t>(kSamples * out));
  side.meta->predict(b.x, o.outputs.data());
  o.few_outputs.resize(static_cast<std::size_t>(3 * out));
  side.meta->predict(one_hot(3), o.few_outputs.data());

  const auto before = weights(side.meta->template_model());
  side.meta->forward_backward(b, *side.loss, side.metrics);
  side.meta->apply_update();
  const auto after = weights(side.meta->template_model());
  o.names = side.meta->template_model().parameter_names();
  for (std::size_t p = 0; p < before.size(); ++p) {
    std::vector<double> g(before[p].size());
    for (std::size_t k = 0; k < g.size(); ++k)
      g[k] = (static_cast<double>(before[p][k]) - after[p][k]) / kLearningRate;
    o.gradients.push_back(std::move(g));
  }
  return o;
}

class CudnnConv2D : public ::testing::TestWithParam<ConvCase> {};

// TANDEM_CONV2D=cudnn computes what im2col and the CPU compute: outputs (two batch sizes), the
// kernel and bias gradients, and the input gradient; auto (whichever path it picks) too.
TEST_P(CudnnConv2D, MatchesIm2colAndTheCpu) {
  REQUIRE_GPU();
  const ConvCase& c = GetParam();
  for (Precision precision : {Precision::fp32, Precision::tf32}) {
    if (precision == Precision::tf32 && !c.tf32) continue;
    SCOPED_TRACE(precision_name(precision));
    const double tolerance = precision == Precision::fp32 ? 1e-5 : 3e-3;
    const Observed cpu = observe(c, "cpu", precision, "");
    const Observed im2col = observe(c, "cuda:0", precision, "im2col");
    const Observed cudnn = observe(c, "cuda:0", precision, "cudnn");
    const Observed automatic = observe(c, "cuda:0", precision, "auto");
    ASSERT_EQ(cudnn.gradients.size(), cpu.gradients.size());
    const std::vector<std::pair<std::string, const Observed*>> pairs = {
        {"cudnn vs cpu", &cpu}, {"cudnn vs im2col", &im2col}};
    for (const auto& [what, other] : pairs) {
      SCOPED_TRACE(what);
      EXPECT_LE(relative_error(cudnn.outputs, other->outputs), tolerance) << "forward";
      EXPECT_LE(relative_error(cudnn.few_outputs, other->few_outputs), tolerance)
          << "forward of 3 samples";
      for (std::size_t p = 0; p < cpu.gradients.size(); ++p)
        EXPECT_LE(relative_error(cudnn.gradients[p], other->gradients[p]), tolerance)
            << "gradient of " << cpu.names[p] << (p == 0 ? " (the Conv2D's input gradient)" : "");
    }
    EXPECT_LE(relative_error(automatic.outputs, cpu.outputs), tolerance) << "auto: forward";
    for (std::size_t p = 0; p < cpu.gradients.size(); ++p)
      EXPECT_LE(relative_error(automatic.gradients[p], cpu.gradients[p]), tolerance)
          << "auto: gradient of " << cpu.names[p];
  }
}

INSTANTIATE_TEST_SUITE_P(Geometries, CudnnConv2D, ::testing::ValuesIn(conv_cases()),
                         [](const auto& info) { return info.param.name; });

// A 2x2 kernel with SAME padding pads one more row and column after the input than before it,
// which cuDNN cannot: forced, a ConfigError naming the variable, the layer and why; under auto
// the layer runs on im2col and computes what the CPU computes.
TEST(CudnnConv2DChoice, UnexpressibleGeometryForcedOnCudnnIsAConfigError) {
  REQUIRE_GPU();
  const ConvCase c{
      "even_kernel_same", {7, 7, 2}, {{"filters", 3}, {"kernel_size", 2}, {"padding", "same"}}};
  const json sgd = {{"class_name", "SGD"}, {"config", {{"learning_rate", 0.1}}}};
  try {
    ConvSide side(probe_model(c), sgd, "cuda:0", Precision::fp32, "cudnn");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(kPathVariable), std::string::npos) << what;
    EXPECT_NE(what.find("'conv'"), std::string::npos) << what;
    EXPECT_NE(what.find("both sides"), std::string::npos) << what;
  }
  EXPECT_EQ(std::getenv(kPathVariable), nullptr);
  const Observed cpu = observe(c, "cpu", Precision::fp32, "");
  const Observed automatic = observe(c, "cuda:0", Precision::fp32, "auto");
  EXPECT_LE(relative_error(automatic.outputs, cpu.outputs), 1e-5);
  for (std::size_t p = 0; p < cpu.gradients.size(); ++p)
    EXPECT_LE(relative_error(automatic.gradients[p], cpu.gradients[p]), 1e-5) << cpu.names[p];
}

TEST(CudnnConv2DChoice, AValueThatIsNotAPathIsAConfigErrorNamingTheVariable) {
  REQUIRE_GPU();
  const ConvCase c{"valid_3x3", {9, 8, 3}, {{"filters", 4}, {"kernel_size", 3}}};
  const json sgd = {{"class_name", "SGD"}, {"config", {{"learning_rate", 0.1}}}};
  try {
    ConvSide side(probe_model(c), sgd, "cuda:0", Precision::fp32, "garbage");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(kPathVariable), std::string::npos) << what;
    EXPECT_NE(what.find("garbage"), std::string::npos) << what;
    EXPECT_NE(what.find("im2col"), std::string::npos) << what;
  }
}

// Training on cuDNN: the steps from the second on are captured in CUDA graphs and replayed
// (nothing may allocate or synchronize in them); a larger evaluation batch moves buffers and a
// last partial batch brings a new batch size (its own search, uncaptured). Losses and weights
// follow the CPU's.
TEST(CudnnConv2DChoice, TrainingStepsOnCudnnFollowTheCpu) {
  REQUIRE_GPU();
  const Shape input{10, 10, 3};
  const json model = sequential(input, json::array({layer("Conv2D", {{"name", "conv_a"},
                                                                     {"filters", 8},
                                                                     {"kernel_size", 3},
                                                                     {"padding", "same"},
                                                                     {"activation", "tanh"}}),
                                                    layer("Conv2D", {{"name", "conv_b"},
                                                                     {"filters", 6},
                                                                     {"kernel_size", 3},
                                                                     {"strides", 2},
                                                                     {"activation", "sigmoid"}}),
                                                    layer("Flatten", {{"name", "flatten"}}),
                                                    layer("Dense", {{"units", 4}})}));
  const json sgd = {{"class_name", "SGD"}, {"config", {{"learning_rate", 0.05}}}};
  ConvSide cpu(model, sgd, "cpu", Precision::fp32, "");
  ConvSide gpu(model, sgd, "cuda:0", Precision::fp32, "cudnn");
  const std::int64_t per_sample = 10 * 10 * 3;
  const auto batch_of = [&](std::int64_t n, std::uint32_t seed) {
    Batch b;
    b.x = Tensor({n, input[0], input[1], input[2]});
    b.y = Tensor({n, 4});
    const auto x = random_vector(static_cast<std::size_t>(n * per_sample), seed);
    const auto y = random_vector(static_cast<std::size_t>(n * 4), seed + 1000);
    std::copy(x.begin(), x.end(), b.x.data());
    std::copy(y.begin(), y.end(), b.y.data());
    return b;
  };
  for (int step = 0; step < 8; ++step) {
    const Batch b = batch_of(step == 7 ? 13 : 32, 100 + static_cast<std::uint32_t>(step));
    const StepSums s_cpu = cpu.meta->forward_backward(b, *cpu.loss, cpu.metrics);
    const StepSums s_gpu = gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
    EXPECT_LE(
        std::fabs(s_gpu.loss.sum - s_cpu.loss.sum) / std::max(std::fabs(s_cpu.loss.sum), 1e-6),
        1e-4)
        << "step " << step;
    cpu.meta->apply_update();
    gpu.meta->apply_update();
    if (step == 3) {
      const Batch big = batch_of(64, 9);
      const StepSums e_cpu = cpu.meta->evaluate(big, *cpu.loss, cpu.metrics);
      const StepSums e_gpu = gpu.meta->evaluate(big, *gpu.loss, gpu.metrics);
      EXPECT_LE(
          std::fabs(e_gpu.loss.sum - e_cpu.loss.sum) / std::max(std::fabs(e_cpu.loss.sum), 1e-6),
          1e-4)
          << "evaluation";
    }
  }
  const auto w_cpu = weights(cpu.meta->template_model());
  const auto w_gpu = weights(gpu.meta->template_model());
  const auto names = cpu.meta->template_model().parameter_names();
  ASSERT_EQ(w_cpu.size(), w_gpu.size());
  for (std::size_t p = 0; p < w_cpu.size(); ++p)
    EXPECT_LE(relative_error(w_gpu[p], w_cpu[p]), 1e-4) << names[p];
}

}  // namespace
}  // namespace tandem
