#include "nn/conv2d.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using test::expect_close;
using test::numeric_gradient;

double act(ActivationKind kind, double z) {
  switch (kind) {
    case ActivationKind::relu:
      return z > 0 ? z : 0;
    case ActivationKind::tanh:
      return std::tanh(z);
    case ActivationKind::sigmoid:
      return 1 / (1 + std::exp(-z));
    default:
      return z;
  }
}

// The geometry, written out independently of nn/spatial.hpp from TensorFlow's definitions.
struct Axis {
  std::int64_t out, pad;  // output length, zero padding before the first input element
};
Axis axis(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d, bool same) {
  const std::int64_t span = (k - 1) * d + 1;
  if (!same) return {(in - span) / s + 1, 0};
  const std::int64_t out = (in + s - 1) / s;
  const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * s + span - in);
  return {out, total / 2};
}

struct ConvCase {
  std::int64_t rows, cols, in, filters;
  std::int64_t kh, kw;
  std::int64_t sh, sw;
  std::int64_t dh, dw;
  bool same;
  bool use_bias;
  ActivationKind activation;
};

void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << c.rows << "x" << c.cols << "x" << c.in << " -> " << c.filters << ", kernel " << c.kh << "x"
      << c.kw << ", strides " << c.sh << "x" << c.sw << ", dilation " << c.dh << "x" << c.dw
      << (c.same ? ", same" : ", valid") << (c.use_bias ? ", bias, " : ", no bias, ")
      << activation_name(c.activation);
}

// A naive direct convolution in double, NHWC input, kernel (kh, kw, in, filters):
//   y[n][i][j][f] = act(b[f] + sum over a, q, ch of
//                       x[n][i*sh + a*dh - pad_rows][j*sw + q*dw - pad_cols][ch] * k[a][q][ch][f])
// with out-of-range input positions read as zeros. Returns sum(w * y).
double reference_loss(const ConvCase& c, std::int64_t batch, const std::vector<double>& x,
                      const std::vector<double>& k, const std::vector<double>& b,
                      const std::vector<double>& w) {
  const Axis ar = axis(c.rows, c.kh, c.sh, c.dh, c.same);
  const Axis ac = axis(c.cols, c.kw, c.sw, c.dw, c.same);
  double loss = 0;
  std::size_t wi = 0;
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t i = 0; i < ar.out; ++i)
      for (std::int64_t j = 0; j < ac.out; ++j)
        for (std::int64_t f = 0; f < c.filters; ++f) {
          double z = b.empty() ? 0.0 : b[f];
          for (std::int64_t a = 0; a < c.kh; ++a) {
            const std::int64_t r = i * c.sh + a * c.dh - ar.pad;
            if (r < 0 || r >= c.rows) continue;
            for (std::int64_t q = 0; q < c.kw; ++q) {
              const std::int64_t col = j * c.sw + q * c.dw - ac.pad;
              if (col < 0 || col >= c.cols) continue;
              for (std::int64_t ch = 0; ch < c.in; ++ch)
                z += x[((n * c.rows + r) * c.cols + col) * c.in + ch] *
                     k[((a * c.kw + q) * c.in + ch) * c.filters + f];
            }
          }
          loss += w[wi++] * act(c.activation, z);
        }
  return loss;
}

class Conv2DGradientTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2DGradientTest, ForwardAndAllGradientsMatchDoubleReference) {
  const ConvCase c = GetParam();
  Conv2DOptions o;
  o.filters = c.filters;
  o.kernel_size = {c.kh, c.kw};
  o.strides = {c.sh, c.sw};
  o.dilation_rate = {c.dh, c.dw};
  o.padding = c.same ? Padding::same : Padding::valid;
  o.use_bias = c.use_bias;
  o.activation = c.activation;
  o.bias_initializer.name = "random_uniform";  // a non-zero bias, so that it matters
  Conv2D conv("conv", o);
  Rng init(3);
  const Shape out = conv.build({c.rows, c.cols, c.in}, init);
  const Axis ar = axis(c.rows, c.kh, c.sh, c.dh, c.same);
  const Axis ac = axis(c.cols, c.kw, c.sw, c.dw, c.same);
  ASSERT_EQ(out, (Shape{ar.out, ac.out, c.filters}));

  const std::int64_t batch = 2;
  Tensor x = test::random_tensor({batch, c.rows, c.cols, c.in}, 11);
  const Tensor& y = conv.forward(x, true);
  ASSERT_EQ(y.shape(), (Shape{batch, ar.out, ac.out, c.filters}));
  Tensor w = test::random_tensor(y.shape(), 12);
  auto params = conv.parameters();
  ASSERT_EQ(params.size(), c.use_bias ? 2u : 1u);
  ASSERT_EQ(params[0]->value.shape(), (Shape{c.kh, c.kw, c.in, c.filters}));
  const auto xd = test::to_double(x), kd = test::to_double(params[0]->value),
             wd = test::to_double(w);
  const std::vector<double> bd =
      c.use_bias ? test::to_double(params[1]->value) : std::vector<double>{};

  double tandem_loss = 0;
  for (std::int64_t i = 0; i < y.size(); ++i) tandem_loss += static_cast<double>(y[i]) * w[i];
  EXPECT_NEAR(tandem_loss, reference_loss(c, batch, xd, kd, bd, wd),
              1e-4 * (1 + std::fabs(tandem_loss)));

  const Tensor& gx = conv.backward(w, true);
  ASSERT_EQ(gx.shape(), x.shape());
  expect_close(
      test::to_double(gx),
      numeric_gradient([&](const auto& v) { return reference_loss(c, batch, v, kd, bd, wd); }, xd),
      1e-3, 1e-4, "d/dx");
  expect_close(
      test::to_double(params[0]->grad),
      numeric_gradient([&](const auto& v) { return reference_loss(c, batch, xd, v, bd, wd); }, kd),
      1e-3, 1e-4, "d/dkernel");
  if (c.use_bias)
    expect_close(test::to_double(params[1]->grad),
                 numeric_gradient(
                     [&](const auto& v) { return reference_loss(c, batch, xd, kd, v, wd); }, bd),
                 1e-3, 1e-4, "d/dbias");

  // backward *sets* the gradients: a second identical step gives the same values, not twice.
  const Tensor k_grad = params[0]->grad.clone();
  conv.forward(x, true);
  conv.backward(w, false);
  for (std::int64_t i = 0; i < k_grad.size(); ++i) EXPECT_EQ(params[0]->grad[i], k_grad[i]);
}

constexpr auto kLinear = ActivationKind::linear;
constexpr auto kRelu = ActivationKind::relu;
constexpr auto kTanh = ActivationKind::tanh;
constexpr auto kSigmoid = ActivationKind::sigmoid;

INSTANTIATE_TEST_SUITE_P(
    Variants, Conv2DGradientTest,
    ::testing::Values(
        // rows, cols, in, filters, kh, kw, sh, sw, dh, dw, same, bias, activation
        ConvCase{7, 5, 3, 4, 3, 2, 1, 1, 1, 1, false, true, kLinear},
        ConvCase{7, 5, 3, 4, 3, 2, 1, 1, 1, 1, true, true, kRelu},
        ConvCase{7, 5, 3, 2, 3, 3, 2, 2, 1, 1, false, false, kTanh},
        ConvCase{7, 5, 3, 4, 3, 2, 2, 2, 1, 1, true, true, kLinear},
        ConvCase{7, 5, 3, 3, 2, 3, 1, 1, 2, 2, false, true, kSigmoid},
        ConvCase{7, 5, 3, 4, 3, 2, 1, 1, 2, 2, true, false, kRelu},
        ConvCase{6, 6, 1, 5, 3, 3, 2, 1, 1, 1, true, true, kLinear},   // strides (2, 1)
        ConvCase{8, 7, 2, 3, 3, 2, 2, 2, 2, 2, true, true, kLinear},   // stride and dilation 2
        ConvCase{4, 4, 2, 3, 1, 1, 1, 1, 1, 1, false, true, kRelu},    // 1x1
        ConvCase{5, 4, 3, 2, 4, 4, 3, 3, 1, 1, true, false, kLinear},  // even kernel, stride 3
        ConvCase{3, 3, 2, 2, 3, 3, 1, 1, 1, 1, false, true, kTanh},    // kernel == input
        // 16 channels: given to oneDNN as its blocked layout (the same bytes as NHWC)
        ConvCase{4, 3, 16, 16, 3, 3, 1, 1, 1, 1, true, true, kRelu},
        ConvCase{5, 4, 16, 5, 3, 3, 2, 2, 1, 1, true, false, kLinear},  // only the input
        ConvCase{4, 3, 3, 16, 3, 3, 1, 1, 1, 1, false, true, kTanh},    // only the output
        ConvCase{5, 5, 16, 16, 3, 3, 1, 1, 2, 2, true, true, kLinear}));  // dilated: NHWC

TEST(Conv2D, OutputShapesAsKerasComputesThem) {
  struct Case {
    Shape input;
    Pair kernel, strides, dilation;
    Padding padding;
    Shape expected;
  };
  const Case cases[] = {
      {{28, 28, 1}, {3, 3}, {1, 1}, {1, 1}, Padding::valid, {26, 26, 32}},
      {{28, 28, 1}, {3, 3}, {1, 1}, {1, 1}, Padding::same, {28, 28, 32}},
      {{28, 28, 1}, {3, 3}, {2, 2}, {1, 1}, Padding::valid, {13, 13, 32}},
      {{28, 28, 1}, {3, 3}, {2, 2}, {1, 1}, Padding::same, {14, 14, 32}},
      {{7, 5, 3}, {3, 2}, {2, 2}, {1, 1}, Padding::same, {4, 3, 32}},
      {{7, 5, 3}, {3, 2}, {1, 1}, {2, 2}, Padding::valid, {3, 3, 32}},
      {{13, 13, 32}, {3, 3}, {1, 1}, {1, 1}, Padding::valid, {11, 11, 32}},
      {{10, 9, 3}, {5, 4}, {3, 2}, {1, 1}, Padding::valid, {2, 3, 32}},
  };
  for (const Case& c : cases) {
    Conv2DOptions o;
    o.filters = 32;
    o.kernel_size = c.kernel;
    o.strides = c.strides;
    o.dilation_rate = c.dilation;
    o.padding = c.padding;
    Conv2D conv("conv2d", o);
    Rng init(0);
    EXPECT_EQ(conv.build(c.input, init), c.expected) << shape_to_string(c.input);
  }
}

TEST(Conv2D, KerasWeightLayoutAndConfig) {
  Conv2DOptions o;
  o.filters = 32;
  o.kernel_size = {3, 3};
  o.activation = ActivationKind::relu;
  Conv2D conv("conv2d", o);
  Rng init(1);
  conv.build({28, 28, 1}, init);
  auto params = conv.parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "kernel");
  EXPECT_EQ(params[0]->value.shape(), (Shape{3, 3, 1, 32}));
  EXPECT_EQ(params[1]->name, "bias");
  EXPECT_EQ(params[1]->value.shape(), (Shape{32}));
  // glorot_uniform with Keras' fans: fan_in = 3*3*1, fan_out = 3*3*32.
  const float limit = std::sqrt(6.0f / (9.0f + 288.0f));
  float largest = 0;
  for (float v : params[0]->value.values()) largest = std::max(largest, std::fabs(v));
  EXPECT_LE(largest, limit);
  EXPECT_GT(largest, 0.9f * limit);
  const json cfg = conv.config();
  EXPECT_EQ(cfg["filters"], 32);
  EXPECT_EQ(cfg["kernel_size"], json::array({3, 3}));
  EXPECT_EQ(cfg["strides"], json::array({1, 1}));
  EXPECT_EQ(cfg["dilation_rate"], json::array({1, 1}));
  EXPECT_EQ(cfg["padding"], "valid");
  EXPECT_EQ(cfg["data_format"], "channels_last");
  EXPECT_EQ(cfg["groups"], 1);
  EXPECT_EQ(cfg["activation"], "relu");
  EXPECT_EQ(cfg["use_bias"], true);
}

TEST(Conv2D, BadShapesNameTheLayer) {
  auto expect_shape_error = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no ShapeError";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("'edges'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Conv2DOptions o;
  o.filters = 4;
  o.kernel_size = {5, 3};
  Rng init(0);
  // A kernel larger than its input with valid padding (with "same" it is fine).
  expect_shape_error([&] { Conv2D("edges", o).build({4, 8, 1}, init); }, "larger than its input");
  o.kernel_size = {3, 3};
  o.dilation_rate = {3, 1};  // spans 7 rows
  expect_shape_error([&] { Conv2D("edges", o).build({6, 8, 1}, init); }, "larger than its input");
  o.dilation_rate = {1, 1};
  o.padding = Padding::same;
  EXPECT_EQ(Conv2D("edges", o).build({2, 2, 1}, init), (Shape{2, 2, 4}));
  o.padding = Padding::valid;
  // Wrong rank, non-positive sizes.
  expect_shape_error([&] { Conv2D("edges", o).build({28, 28}, init); }, "(None, 28, 28)");
  expect_shape_error([&] { Conv2D("edges", o).build({28, 0, 1}, init); }, "positive");
  o.filters = 0;
  expect_shape_error([&] { Conv2D("edges", o).build({28, 28, 1}, init); }, "positive");
  o.filters = 4;
  o.strides = {1, -2};
  expect_shape_error([&] { Conv2D("edges", o).build({28, 28, 1}, init); }, "positive");
  o.strides = {1, 1};
  // Channels mismatch and wrong rank at forward.
  Conv2D conv("edges", o);
  conv.build({8, 8, 3}, init);
  Tensor wrong_channels({2, 8, 8, 1});
  expect_shape_error([&] { conv.forward(wrong_channels, true); }, "(None, 8, 8, 3)");
  Tensor flat({2, 192});
  expect_shape_error([&] { conv.forward(flat, true); }, "(2, 192)");
  Tensor x({2, 8, 8, 3});
  conv.forward(x, true);
  Tensor wrong_grad({2, 6, 6, 5});
  expect_shape_error([&] { conv.backward(wrong_grad, true); }, "(2, 6, 6, 4)");
}

TEST(Conv2D, CachesPerBatchSizeAndReusesItsBuffers) {
  Conv2DOptions o;
  o.filters = 8;
  o.kernel_size = {3, 3};
  o.padding = Padding::same;
  o.activation = ActivationKind::relu;
  o.bias_initializer.name = "random_uniform";
  Conv2D conv("c", o);
  Rng init(4);
  conv.build({9, 9, 2}, init);
  Tensor big = test::random_tensor({5, 9, 9, 2}, 5);
  Tensor one = Tensor::view(big, 0, {1, 9, 9, 2});
  const Tensor y5 = conv.forward(big, true).clone();
  const float* buffer = conv.forward(big, true).data();
  const Tensor& y1 = conv.forward(one, true);
  ASSERT_EQ(y1.shape(), (Shape{1, 9, 9, 8}));
  for (std::int64_t i = 0; i < y1.size(); ++i) EXPECT_NEAR(y1[i], y5[i], 1e-5);
  // Back to the larger batch: the same output buffer, the same values.
  const Tensor& again = conv.forward(big, true);
  EXPECT_EQ(again.data(), buffer);
  for (std::int64_t i = 0; i < again.size(); ++i) EXPECT_EQ(again[i], y5[i]);
  // An empty batch gives an empty output and zero gradients.
  Tensor none({0, 9, 9, 2});
  EXPECT_EQ(conv.forward(none, true).shape(), (Shape{0, 9, 9, 8}));
  conv.backward(Tensor({0, 9, 9, 8}), true);
  for (float g : conv.parameters()[0]->grad.values()) EXPECT_EQ(g, 0.0f);
}

// Config parsing through a whole model, so errors carry their full JSON path.
json conv_model(const json& conv_config) {
  json cfg = conv_config;
  cfg["input_shape"] = {8, 8, 3};
  return {{"class_name", "Sequential"},
          {"config", {{"layers", {{{"class_name", "Conv2D"}, {"config", cfg}}}}}}};
}

std::string config_error(const json& model) {
  return test::model_config_error(model);
}

TEST(Conv2D, ParsesKerasConfigs) {
  auto m = Model::from_config(
      conv_model({{"filters", 32}, {"kernel_size", {3, 3}}, {"activation", "relu"}}), "model", 0);
  EXPECT_EQ(m->layer(0).name(), "conv2d");
  EXPECT_EQ(m->layer(0).class_name(), "Conv2D");
  EXPECT_EQ(m->output_shape(), (Shape{6, 6, 32}));
  EXPECT_EQ(m->count_params(), 3 * 3 * 3 * 32 + 32);
  // Ints for pairs, Keras 2 and 3 keys, case-insensitive padding.
  auto full = Model::from_config(
      conv_model({{"filters", 4},
                  {"kernel_size", 2},
                  {"strides", 2},
                  {"padding", "SAME"},
                  {"data_format", "channels_last"},
                  {"dilation_rate", 1},
                  {"groups", 1},
                  {"activation", "tanh"},
                  {"use_bias", false},
                  {"kernel_initializer", {{"class_name", "HeNormal"}, {"config", {{"seed", 1}}}}},
                  {"bias_initializer", "zeros"},
                  {"kernel_regularizer", nullptr},
                  {"bias_constraint", nullptr}}),
      "model", 0);
  EXPECT_EQ(full->output_shape(), (Shape{4, 4, 4}));
  EXPECT_EQ(full->count_params(), 2 * 2 * 3 * 4);
  const json cfg = full->layer(0).config();
  EXPECT_EQ(cfg["kernel_size"], json::array({2, 2}));
  EXPECT_EQ(cfg["padding"], "same");
  EXPECT_EQ(cfg["use_bias"], false);
  // Round trip: the layer's own config builds the same layer.
  auto again = Model::from_config(conv_model(cfg), "model", 0);
  EXPECT_EQ(again->layer(0).config(), cfg);
}

TEST(Conv2D, ConfigErrorsNameTheJsonPath) {
  const std::string at = "'model.config.layers[0].config.";
  auto expect_error = [&](const json& conv, const std::string& where, const std::string& what) {
    const std::string e = config_error(conv_model(conv));
    EXPECT_NE(e.find(at + where + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  expect_error({{"kernel_size", 3}}, "filters", "required key is missing");
  expect_error({{"filters", 0}, {"kernel_size", 3}}, "filters", "positive");
  expect_error({{"filters", 2}}, "kernel_size", "required key is missing");
  expect_error({{"filters", 2}, {"kernel_size", {3}}}, "kernel_size", "a list of 2 integers");
  expect_error({{"filters", 2}, {"kernel_size", {3, -1}}}, "kernel_size[1]", "positive integer");
  expect_error({{"filters", 2}, {"kernel_size", "3"}}, "kernel_size", "got a string");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"strides", {1, 0}}}, "strides[1]",
               "positive integer");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"padding", "full"}}, "padding",
               "'valid', 'same'");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"data_format", "channels_first"}},
               "data_format", "channels_last");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"groups", 3}}, "groups",
               "must divide filters (2)");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"groups", 0}}, "groups", "positive");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"strides", 2}, {"dilation_rate", 2}},
               "dilation_rate", "strides > 1");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"activation", "relu6x"}}, "activation",
               "relu6x");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"lora_rank", 4}}, "lora_rank",
               "not supported");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"activity_regularizer", "l3"}},
               "activity_regularizer", "unknown regularizer 'l3'");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"kernel_regularizer", "l3"}},
               "kernel_regularizer", "unknown regularizer 'l3'");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"filter", 2}}, "filter", "unknown key");
  // A kernel larger than the input is a shape error, reported at the layer's path.
  const std::string e = config_error(conv_model({{"filters", 2}, {"kernel_size", 9}}));
  EXPECT_NE(e.find("'model.config.layers[0]'"), std::string::npos) << e;
  EXPECT_NE(e.find("layer 'conv2d' (Conv2D)"), std::string::npos) << e;
  // Groups that do not divide the input's channels: a shape error naming both counts.
  const std::string g = config_error(conv_model({{"filters", 2}, {"kernel_size", 3}, {"groups", 2}}));
  EXPECT_NE(g.find("groups 2 must divide the input channels (3)"), std::string::npos) << g;
}

// docs/design.md's fashion-cnn, as Keras would save it. Keras' count, by hand:
// conv2d 3*3*1*32 + 32 = 320; 28 -> 26 -> pool 13; conv2d_1 3*3*32*64 + 64 = 18,496;
// 13 -> 11 -> pool 5 (floor); flatten 5*5*64 = 1,600; dense 1600*128 + 128 = 204,928;
// dense_1 128*10 + 10 = 1,290. Total 320 + 18,496 + 204,928 + 1,290 = 225,034.
TEST(Conv2D, FashionCnnHasKerasParameterCountAndRuns) {
  auto layer = [](const std::string& cls, json cfg) {
    return json{{"class_name", cls}, {"config", cfg}};
  };
  const json model = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "fashion_cnn"},
        {"layers",
         {layer("InputLayer", {{"batch_shape", {nullptr, 28, 28, 1}}}),
          layer("Conv2D", {{"filters", 32}, {"kernel_size", {3, 3}}, {"activation", "relu"}}),
          layer("MaxPooling2D", {{"pool_size", {2, 2}}}),
          layer("Conv2D", {{"filters", 64}, {"kernel_size", {3, 3}}, {"activation", "relu"}}),
          layer("MaxPooling2D", {{"pool_size", {2, 2}}}), layer("Flatten", json::object()),
          layer("Dense", {{"units", 128}, {"activation", "relu"}}),
          layer("Dense", {{"units", 10}})}}}}};
  auto m = Model::from_config(model, "model", 0);
  EXPECT_EQ(m->count_params(), 225034);
  // The name column widens from Keras' 29 to fit "max_pooling2d_1 (MaxPooling2D)".
  const std::string s = m->summary();
  EXPECT_NE(s.find(" conv2d (Conv2D)                (None, 26, 26, 32)        320\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find(" max_pooling2d (MaxPooling2D)   (None, 13, 13, 32)        0\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find(" conv2d_1 (Conv2D)              (None, 11, 11, 64)        18,496\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("(None, 5, 5, 64)"), std::string::npos) << s;
  EXPECT_NE(s.find(" flatten (Flatten)              (None, 1600)              0\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("Total params: 225,034"), std::string::npos) << s;

  // One training step's forward and backward run end to end.
  Tensor x = test::random_tensor({4, 28, 28, 1}, 8, 0, 1);
  const Tensor& y = m->forward(x, true);
  ASSERT_EQ(y.shape(), (Shape{4, 10}));
  Tensor g = test::random_tensor({4, 10}, 9);
  m->backward(g);
  double norm = 0;
  for (float v : m->parameters()[0]->grad.values()) norm += std::fabs(v);
  EXPECT_GT(norm, 0);
  EXPECT_TRUE(std::isfinite(norm));
}

}  // namespace
}  // namespace tandem::nn

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

// A NaN input must come out of a relu Conv2D as NaN, as relu does everywhere in Tandem, and never
// silently become 0 (which oneDNN 2.6's relu post-op would do: it is not used for that reason).
TEST(Conv2D, ReluPropagatesNaN) {
  Conv2DOptions o;
  o.filters = 3;
  o.kernel_size = {3, 3};
  o.activation = ActivationKind::relu;
  Conv2D conv("conv", o);
  Rng init(1);
  conv.build({6, 6, 2}, init);
  Tensor x = test::random_tensor({1, 6, 6, 2}, 4);
  x[(0 * 6 + 0) * 2 + 0] = std::numeric_limits<float>::quiet_NaN();  // pixel (0, 0), channel 0
  const Tensor& y = conv.forward(x, true);
  // Only output (0, 0) sees pixel (0, 0) with a 3×3 valid kernel.
  for (std::int64_t f = 0; f < 3; ++f) EXPECT_TRUE(std::isnan(y[f])) << f;
  for (std::int64_t i = 3; i < y.size(); ++i) EXPECT_FALSE(std::isnan(y[i])) << i;
}

}  // namespace
}  // namespace tandem::nn
