// Keras' EinsumDense from its config: the kernel, bias and output shapes Keras'
// _analyze_einsum_string gives (worked out by hand below) for the equations Keras' own layers
// and users write (a projection to heads and back, an ellipsis on either side, an axis of all
// three operands, a permuted output); values by hand; the config written back; and every bad
// equation, output_shape or bias_axes refused at its JSON path, or at build naming the layer
// and its place.
// Values and gradients against torch.einsum: tests/oracle.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json einsum(const std::string& equation, json output_shape, json bias_axes = nullptr) {
  return {{"class_name", "EinsumDense"},
          {"config",
           {{"equation", equation},
            {"output_shape", std::move(output_shape)},
            {"bias_axes", std::move(bias_axes)}}}};
}

// A Sequential model of `layer` over inputs of per-sample shape `input`.
json model_of(const Shape& input, const json& layer) {
  json shape = json::array({nullptr});
  for (std::int64_t d : input) shape.push_back(d);
  return {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "m"},
        {"layers",
         json::array({{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", shape}}}},
                      layer})}}}};
}

struct Expected {
  Shape output, kernel;
  std::optional<Shape> bias;
};

void expect_shapes(const Shape& input, const json& layer, const Expected& want) {
  SCOPED_TRACE(layer.dump());
  auto m = Model::from_config(model_of(input, layer), "model", 0);
  EXPECT_EQ(m->layer(0).class_name(), "EinsumDense");
  EXPECT_EQ(m->layer(0).name(), "einsum_dense");
  EXPECT_EQ(m->output_shape(), want.output);
  const std::vector<Parameter*> params = m->layer(0).parameters();
  ASSERT_EQ(params.size(), want.bias ? 2u : 1u);
  EXPECT_EQ(params[0]->name, "kernel");
  EXPECT_EQ(params[0]->value.shape(), want.kernel);
  std::int64_t count = shape_size(want.kernel);
  if (want.bias) {
    EXPECT_EQ(params[1]->name, "bias");
    EXPECT_EQ(params[1]->value.shape(), *want.bias);
    count += shape_size(*want.bias);
  }
  EXPECT_EQ(m->count_params(), count);
  // Written back, the config builds the same layer.
  const json cfg = m->layer(0).config();
  auto again = Model::from_config(model_of(input, {{"class_name", "EinsumDense"}, {"config", cfg}}),
                                  "model", 0);
  EXPECT_EQ(again->layer(0).config(), cfg);
  EXPECT_EQ(again->output_shape(), want.output);
}

TEST(EinsumDense, ShapesAndWeightsAsKerasAnalyzesTheEquation) {
  // Dense's own form: (batch, 5) -> (batch, 6).
  expect_shapes({5}, einsum("ab,bc->ac", {6}, "c"), {{6}, {5, 6}, Shape{6}});
  // On every step: (batch, 4, 5) -> (batch, 4, 6), the output_shape's step null.
  expect_shapes({4, 5}, einsum("abc,cd->abd", {nullptr, 6}, "d"), {{4, 6}, {5, 6}, Shape{6}});
  // MultiHeadAttention's query projection: 2 heads of 3, a bias per head and unit.
  expect_shapes({4, 5}, einsum("abc,cde->abde", {nullptr, 2, 3}, "de"),
                {{4, 2, 3}, {5, 2, 3}, Shape{2, 3}});
  // Its output projection: heads and units summed.
  expect_shapes({4, 2, 3}, einsum("abcd,cde->abe", {4, 6}, "e"), {{4, 6}, {2, 3, 6}, Shape{6}});
  // An ellipsis on the left holds the batch and the steps: output_shape sizes 'c' alone.
  expect_shapes({3, 4, 6}, einsum("...b,bc->...c", {5}, "c"), {{3, 4, 5}, {6, 5}, Shape{5}});
  // On the right: Keras' bias gets a 1 for each elided axis.
  expect_shapes({4, 2, 5}, einsum("ab...,bc->ac...", {3}, "c"),
                {{3, 2, 5}, {4, 3}, Shape{3, 1, 1}});
  // 'b' in all three operands: a product per b.
  expect_shapes({4, 5}, einsum("abc,bcd->abd", {4, 3}, "d"), {{4, 3}, {4, 5, 3}, Shape{3}});
  // A permuted output, the bias over the last axis only and over two with a 1 between: Keras'
  // bias spans the output from its first bias axis.
  expect_shapes({3, 5}, einsum("abc,cd->adb", {4, 3}, "b"), {{4, 3}, {5, 4}, Shape{3}});
  expect_shapes({4, 3}, einsum("abc,bd->adc", {5, 3}, "dc"), {{5, 3}, {4, 5}, Shape{5, 3}});
  expect_shapes({2, 3, 4}, einsum("abcd,de->aecb", {6, 3, 2}, "eb"),
                {{6, 3, 2}, {4, 6}, Shape{6, 1, 2}});
  // No bias.
  expect_shapes({4, 5}, einsum("abc,cd->abd", {4, 6}), {{4, 6}, {5, 6}, std::nullopt});
  // An integer output_shape, as Keras takes it.
  expect_shapes({5}, einsum("ab,bc->ac", 7), {{7}, {5, 7}, std::nullopt});
}

// y[a, d, b] = Σ_c x[a, b, c] · kernel[c, d] + bias[b]: each output value summed by hand.
TEST(EinsumDense, APermutedOutputIsTheSumsByHand) {
  json layer = einsum("abc,cd->adb", {2, 3}, "b");
  auto m = Model::from_config(model_of({3, 2}, layer), "model", 0);
  const std::vector<Parameter*> params = m->layer(0).parameters();
  Tensor& kernel = params[0]->value;  // (c = 2, d = 2)
  const float k[4] = {1, 2, -1, 0.5f};
  for (int i = 0; i < 4; ++i) kernel[i] = k[i];
  Tensor& bias = params[1]->value;  // (b = 3)
  bias[0] = 10;
  bias[1] = 20;
  bias[2] = 30;
  Tensor x({2, 3, 2});
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
  const Tensor& y = m->forward(x, false);
  ASSERT_EQ(y.shape(), (Shape{2, 2, 3}));
  for (int a = 0; a < 2; ++a)
    for (int d = 0; d < 2; ++d)
      for (int b = 0; b < 3; ++b) {
        float want = bias[b];
        for (int c = 0; c < 2; ++c) want += x[(a * 3 + b) * 2 + c] * k[c * 2 + d];
        EXPECT_EQ(y[(a * 2 + d) * 3 + b], want) << a << " " << d << " " << b;
      }
  // a = 1, d = 0, b = 2: x[1, 2] = (11, 12); 11·1 + 12·(-1) + 30 = 29.
  EXPECT_EQ(y[(1 * 2 + 0) * 3 + 2], 29.0f);
}

TEST(EinsumDense, BadConfigsAreRefusedAtTheirPlace) {
  const std::string at = "'model.config.layers[1].config.";
  auto expect_error = [&](const json& layer, const std::string& where, const std::string& what) {
    const std::string e = test::model_config_error(model_of({4, 5}, layer));
    EXPECT_NE(e.find(at + where + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  for (const char* bad : {"abc,cd", "abc->abd", "ab c,cd->abd", "a...bc,cd->abd", "...abc,cd->abd",
                          "a...,cd->ad...", "abc,cd->abd,e", ""})
    expect_error(einsum(bad, {4, 6}), "equation", "expected Keras' form '[X],[Y]->[Z]'");
  expect_error(einsum("abb,bd->abd", {4, 6}), "equation",
               "its input 'abb' names axis 'b' twice (a diagonal, which Tandem does not take)");
  expect_error(einsum("abc,cd->abe", {4, 6}), "equation",
               "output axis 'e' is neither the input's nor the kernel's");
  expect_error(einsum("abc,cde->abd", {4, 6}), "equation",
               "kernel axis 'e' is neither the input's nor the output's");
  expect_error(einsum("abc,cd->ad", {6}), "equation",
               "input axis 'b' is summed over the input alone (in neither the kernel nor the "
               "output), which Tandem does not take");
  expect_error(einsum("abc,cd->bad", {4, 6}), "equation",
               "the output must keep the batch axis 'a' first, as the input has it");
  expect_error(einsum("abc,acd->abd", {4, 6}), "equation",
               "the batch axis 'a' cannot be the kernel's");
  expect_error(einsum("abc,cd->abd", "6"), "output_shape",
               "expected a positive integer or a list (null or a positive integer per axis after "
               "the batch's), got \"6\"");
  expect_error(einsum("abc,cd->abd", {4, 0}), "output_shape[1]",
               "expected null or a positive integer, got 0");
  expect_error(einsum("abc,cd->abd", {4, 6}, "e"), "bias_axes",
               "bias axis 'e' is not an axis of the output 'abd'");
  expect_error(einsum("abc,cd->abd", {4, 6}, "dd"), "bias_axes", "bias_axes names axis 'd' twice");
  expect_error(einsum("abc,cd->abd", {4, 6}, 3), "bias_axes",
               "expected null or a string of output axes, got 3");
  json lora = einsum("abc,cd->abd", {4, 6});
  lora["config"]["lora_rank"] = 4;
  expect_error(lora, "lora_rank", "is not supported by Tandem yet");
}

TEST(EinsumDense, ShapesThatDoNotFitAreNamedAtBuild) {
  auto build_error = [](const Shape& input, const json& layer) -> std::string {
    try {
      Model::from_config(model_of(input, layer), "model", 0);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string who =
      "config error at 'model.config.layers[1]': layer 'einsum_dense' (EinsumDense): ";
  EXPECT_EQ(build_error({4, 5, 6}, einsum("abc,cd->abd", {4, 6})),
            who + "its equation's input 'abc' does not fit inputs (None, 4, 5, 6)");
  EXPECT_EQ(build_error({4, 5}, einsum("abc,cd->abd", {6})),
            who + "its output_shape has 1 axes, but its equation's output 'abd' sizes 2");
  EXPECT_EQ(build_error({4, 5}, einsum("abc,cd->abd", {3, 6})),
            who + "its output_shape gives axis 'b' 3, but its inputs (None, 4, 5) give 4");
  EXPECT_EQ(build_error({4, 5}, einsum("abc,cd->abd", {4, nullptr})),
            who + "its output_shape gives no size for axis 'd', which only the kernel has");
  EXPECT_EQ(build_error({5}, einsum("...b,bc->...c", {nullptr})),
            who + "its output_shape gives no size for axis 'c', which only the kernel has");
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
