// Conv2DTranspose: output shapes by Keras' deconv_output_length (hand-computed), the kernel's
// Keras layout, its config round trip, refused configs, and the transposition itself: <y, g> =
// <x, conv(g)> for the Conv2D of the same kernel (the adjoint identity, an independent check of
// the roles the layer gives its Convolution2D). The values against PyTorch are in
// tests/oracle/layer_oracle_test.cpp.
#include <gtest/gtest.h>

#include "gradient_check.hpp"
#include "nn/conv2d.hpp"
#include "nn/conv2d_transpose.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json model_with(const json& layer, const json& input_shape) {
  json shape = json::array({nullptr});
  for (const auto& d : input_shape) shape.push_back(d);
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", shape}}}},
              {{"class_name", "Conv2DTranspose"}, {"config", layer}}}}}}};
}

Shape output_of(const json& layer, const json& input_shape) {
  return Model::from_config(model_with(layer, input_shape), "model", 0)->output_shape();
}

TEST(Conv2DTranspose, OutputShapesFollowKerasDeconvOutputLength) {
  const json in = {4, 5, 3};
  // valid: n·s + max(k − s, 0); same: n·s.
  EXPECT_EQ(output_of({{"filters", 2}, {"kernel_size", 3}, {"strides", 2}}, in), (Shape{9, 11, 2}));
  EXPECT_EQ(output_of({{"filters", 2}, {"kernel_size", 3}, {"strides", 2}, {"padding", "same"}}, in),
            (Shape{8, 10, 2}));
  EXPECT_EQ(output_of({{"filters", 2}, {"kernel_size", 1}, {"strides", 3}}, in), (Shape{12, 15, 2}));
  // output_padding: (n − 1)·s + k − 2·pad + op, pad = k / 2 for same.
  EXPECT_EQ(output_of({{"filters", 2}, {"kernel_size", 3}, {"strides", 2}, {"padding", "same"},
                       {"output_padding", {1, 0}}},
                      in),
            (Shape{8, 9, 2}));
  EXPECT_EQ(output_of({{"filters", 2}, {"kernel_size", 2}, {"strides", 3}, {"output_padding", 2}},
                      in),
            (Shape{13, 16, 2}));
  // dilation 2 widens a 3-tap kernel to 5: valid 4 + 4 = 8 rows.
  EXPECT_EQ(output_of({{"filters", 2}, {"kernel_size", 3}, {"dilation_rate", 2}}, in),
            (Shape{8, 9, 2}));
  auto model = Model::from_config(
      model_with({{"filters", 2}, {"kernel_size", {3, 2}}, {"strides", 2}}, in), "model", 0);
  EXPECT_EQ(model->layer(0).parameters().at(0)->value.shape(), (Shape{3, 2, 2, 3}));
}

TEST(Conv2DTranspose, ConfigRoundTripsAndBadConfigsAreRefused) {
  const json layer = {{"name", "up"},       {"filters", 4},           {"kernel_size", {3, 3}},
                      {"strides", {2, 2}},  {"padding", "same"},      {"output_padding", {1, 1}},
                      {"dilation_rate", {1, 1}}, {"activation", "relu"}, {"use_bias", true}};
  auto model = Model::from_config(model_with(layer, {3, 3, 2}), "model", 0);
  const json written = model->config()["config"]["layers"][1]["config"];
  for (const auto& [key, value] : layer.items()) EXPECT_EQ(written[key], value) << key;
  auto again = Model::from_config(model_with(written, {3, 3, 2}), "model", 0);
  EXPECT_EQ(again->output_shape(), model->output_shape());

  const auto error = [](const json& cfg) {
    try {
      Model::from_config(model_with(cfg, {4, 4, 2}), "model", 0);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string at_stride = error({{"filters", 2}, {"kernel_size", 3}, {"strides", 2},
                                       {"output_padding", 2}});
  EXPECT_NE(at_stride.find("output_padding"), std::string::npos) << at_stride;
  EXPECT_NE(at_stride.find("less than its stride"), std::string::npos) << at_stride;
  EXPECT_NE(error({{"filters", 2}, {"kernel_size", 3}, {"output_padding", "1"}}).find("output_padding"),
            std::string::npos);
  EXPECT_NE(error({{"filters", 2}, {"kernel_size", 3}, {"data_format", "channels_first"}})
                .find("data_format"),
            std::string::npos);
  EXPECT_NE(error({{"kernel_size", 3}}).find("filters"), std::string::npos);
  // An output_padding that makes a length the convolution would not map back to the input's:
  // same padding, an even kernel and stride 1 give (4 − 1) + 2 − 2·1 + 0 = 3 rows, not 4.
  const std::string unmapped =
      error({{"filters", 2}, {"kernel_size", 2}, {"padding", "same"}, {"output_padding", 0}});
  EXPECT_NE(
      unmapped.find("(Conv2DTranspose): output_padding 0 along the height with kernel (2, 2), "
                    "strides (1, 1), dilation_rate (1, 1) and same padding makes an output "
                    "of 3, which that convolution maps to 3, not to the input's 4"),
      std::string::npos)
      << unmapped;
  // ... and one that leaves no output at all: a 1×1 input, the same settings: 0 rows.
  try {
    Model::from_config(
        model_with({{"filters", 2}, {"kernel_size", 2}, {"padding", "same"}, {"output_padding", 0}},
                   {1, 1, 2}),
        "model", 0);
    ADD_FAILURE() << "a Conv2DTranspose of no output was built";
  } catch (const ConfigError& e) {
    EXPECT_NE(
        std::string(e.what()).find("same padding give no output for the input (None, 1, 1, 2)"),
        std::string::npos)
        << e.what();
  }
}

// <conv_transpose(x), g> = <x, conv(g)>: the transposed convolution is the adjoint of Conv2D
// with the same kernel, strides and padding (no bias, linear).
TEST(Conv2DTranspose, IsTheAdjointOfConv2D) {
  for (const char* padding : {"valid", "same"}) {
    SCOPED_TRACE(padding);
    Conv2DTransposeOptions t;
    t.conv.filters = 3;
    t.conv.kernel_size = {3, 2};
    t.conv.strides = {2, 2};
    t.conv.padding = std::string(padding) == "same" ? Padding::same : Padding::valid;
    t.conv.use_bias = false;
    Conv2DTranspose up("up", t);
    Rng init(1);
    const Shape out = up.build({4, 3, 5}, init);
    Conv2DOptions c = t.conv;
    c.filters = 5;  // from the transposed layer's output channels back to its input channels
    Conv2D down("down", c);
    EXPECT_EQ(down.build(out, init), (Shape{4, 3, 5}));
    // The same kernel: Conv2D's (kh, kw, in=3, filters=5) is the transposed layer's (kh, kw, 3, 5).
    down.parameters()[0]->value = up.parameters()[0]->value.clone();

    const Tensor x = test::random_tensor({2, 4, 3, 5}, 3);
    const Tensor g = test::random_tensor({2, out[0], out[1], out[2]}, 4);
    const Tensor y = up.forward(x, false).clone();
    const Tensor z = down.forward(g, false).clone();
    double left = 0, right = 0;
    for (std::int64_t i = 0; i < y.size(); ++i) left += static_cast<double>(y[i]) * g[i];
    for (std::int64_t i = 0; i < x.size(); ++i) right += static_cast<double>(x[i]) * z[i];
    EXPECT_NEAR(left, right, 1e-4 * (1 + std::abs(right)));
  }
}

// The input gradient of the (linear) transposed convolution is Conv2D's forward of dy, and
// backward sets the kernel gradient rather than adding to it.
TEST(Conv2DTranspose, InputGradientIsConv2DAndBackwardSetsGradients) {
  Conv2DTransposeOptions t;
  t.conv.filters = 2;
  t.conv.kernel_size = {3, 3};
  t.conv.strides = {2, 1};
  t.conv.padding = Padding::same;
  t.conv.use_bias = false;
  Conv2DTranspose up("up", t);
  Rng init(2);
  const Shape out = up.build({3, 3, 4}, init);
  Conv2DOptions c = t.conv;
  c.filters = 4;
  Conv2D down("down", c);
  down.build(out, init);
  down.parameters()[0]->value = up.parameters()[0]->value.clone();
  const Tensor x = test::random_tensor({2, 3, 3, 4}, 5);
  const Tensor g = test::random_tensor({2, out[0], out[1], out[2]}, 6);
  up.forward(x, true);
  const Tensor dx = up.backward(g, true).clone();
  const Tensor& reference = down.forward(g, false);
  ASSERT_EQ(dx.shape(), reference.shape());
  for (std::int64_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], reference[i], 1e-5f);
  const Tensor dk = up.parameters()[0]->grad.clone();
  up.forward(x, true);
  up.backward(g, false);
  for (std::int64_t i = 0; i < dk.size(); ++i) EXPECT_EQ(up.parameters()[0]->grad[i], dk[i]);
}

}  // namespace
}  // namespace tandem::nn
