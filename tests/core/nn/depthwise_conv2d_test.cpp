// DepthwiseConv2D and SeparableConv2D: Keras' weight names, shapes and order, their configs
// (round trip, Keras' keys), and the configs they refuse. Values and gradients against PyTorch are
// in tests/oracle/layer_oracle_test.cpp; the grouped convolution under them against a direct
// reference in tests/core/backend/window_math_test.cpp.
#include <gtest/gtest.h>

#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json model_with(const std::string& cls, const json& layer) {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 8, 7, 3}}}}},
              {{"class_name", cls}, {"config", layer}}}}}}};
}

std::string error_of(const std::string& cls, const json& layer) {
  try {
    Model::from_config(model_with(cls, layer), "model", 0);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DepthwiseConv2D, WeightsAndShapesAreKeras) {
  auto model = Model::from_config(
      model_with("DepthwiseConv2D", {{"kernel_size", 3}, {"depth_multiplier", 2},
                                     {"strides", 2}, {"padding", "same"}}),
      "model", 0);
  EXPECT_EQ(model->output_shape(), (Shape{4, 4, 6}));
  const auto params = model->layer(0).parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "depthwise_kernel");
  EXPECT_EQ(params[0]->value.shape(), (Shape{3, 3, 3, 2}));
  EXPECT_EQ(params[1]->name, "bias");
  EXPECT_EQ(params[1]->value.shape(), (Shape{6}));
  EXPECT_EQ(model->count_params(), 3 * 3 * 3 * 2 + 6);
}

TEST(SeparableConv2D, WeightsAndShapesAreKeras) {
  auto model = Model::from_config(
      model_with("SeparableConv2D", {{"filters", 5}, {"kernel_size", {3, 2}},
                                     {"depth_multiplier", 2}}),
      "model", 0);
  EXPECT_EQ(model->output_shape(), (Shape{6, 6, 5}));
  const auto params = model->layer(0).parameters();
  ASSERT_EQ(params.size(), 3u);
  EXPECT_EQ(params[0]->name, "depthwise_kernel");
  EXPECT_EQ(params[0]->value.shape(), (Shape{3, 2, 3, 2}));
  EXPECT_EQ(params[1]->name, "pointwise_kernel");
  EXPECT_EQ(params[1]->value.shape(), (Shape{1, 1, 6, 5}));
  EXPECT_EQ(params[2]->name, "bias");
  EXPECT_EQ(params[2]->value.shape(), (Shape{5}));
}

TEST(DepthwiseAndSeparable, ConfigsRoundTripWithKerasKeys) {
  const json depthwise = {{"name", "dw"},
                          {"kernel_size", {3, 3}},
                          {"strides", {1, 1}},
                          {"padding", "valid"},
                          {"depth_multiplier", 2},
                          {"dilation_rate", {2, 2}},
                          {"activation", "relu"},
                          {"use_bias", false},
                          {"depthwise_initializer", {{"class_name", "HeNormal"}, {"config", {{"seed", 3}}}}},
                          {"depthwise_regularizer", {{"class_name", "L2"}, {"config", {{"l2", 0.01}}}}},
                          {"depthwise_constraint", {{"class_name", "MaxNorm"}, {"config", {{"max_value", 2.0}, {"axis", 0}}}}}};
  const json separable = {{"name", "sep"},
                          {"filters", 4},
                          {"kernel_size", {3, 3}},
                          {"strides", {2, 2}},
                          {"padding", "same"},
                          {"depth_multiplier", 1},
                          {"activation", "tanh"},
                          {"use_bias", true},
                          {"pointwise_regularizer", {{"class_name", "L1"}, {"config", {{"l1", 0.001}}}}},
                          {"pointwise_constraint", {{"class_name", "NonNeg"}, {"config", json::object()}}}};
  for (const auto& [cls, layer] : {std::pair{std::string("DepthwiseConv2D"), depthwise},
                                   std::pair{std::string("SeparableConv2D"), separable}}) {
    SCOPED_TRACE(cls);
    auto model = Model::from_config(model_with(cls, layer), "model", 0);
    const json written = model->config()["config"]["layers"][1]["config"];
    for (const auto& [key, value] : layer.items()) {
      if (key != "depthwise_initializer") {
        EXPECT_EQ(written[key], value) << key;
      }
    }
    auto again = Model::from_config(model_with(cls, written), "model", 0);
    EXPECT_EQ(again->config(), model->config());
  }
}

TEST(DepthwiseAndSeparable, BadConfigsAreRefusedAtTheirKeys) {
  const auto expect = [](const std::string& cls, const json& layer, const std::string& wanted) {
    const std::string e = error_of(cls, layer);
    EXPECT_NE(e.find(wanted), std::string::npos) << cls << " " << layer.dump() << ": " << e;
  };
  expect("DepthwiseConv2D", {{"kernel_size", 3}, {"depth_multiplier", 0}},
         "depth_multiplier'");
  expect("DepthwiseConv2D", {{"depth_multiplier", 1}}, "kernel_size'");
  expect("DepthwiseConv2D", {{"kernel_size", 3}, {"kernel_initializer", "zeros"}},
         "kernel_initializer'");  // Keras calls it depthwise_initializer
  expect("DepthwiseConv2D", {{"kernel_size", 3}, {"depthwise_regularizer", "l3"}},
         "unknown regularizer 'l3'");
  expect("DepthwiseConv2D", {{"kernel_size", 9}}, "larger than its input");
  expect("SeparableConv2D", {{"kernel_size", 3}}, "filters'");
  expect("SeparableConv2D", {{"filters", 2}, {"kernel_size", 3}, {"pointwise_constraint", 1}},
         "pointwise_constraint'");
  expect("SeparableConv2D", {{"filters", 2}, {"kernel_size", 3}, {"strides", 2},
                             {"dilation_rate", 2}},
         "strides > 1");
  expect("SeparableConv2D", {{"filters", 2}, {"kernel_size", 3}, {"lora_rank", 4}},
         "lora_rank'");
  expect("SeparableConv2D", {{"filters", 2}, {"kernel_size", 3}, {"activity_regularizer", 2}},
         "activity_regularizer'");
}

}  // namespace
}  // namespace tandem
