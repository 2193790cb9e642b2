// The call probe (parallel/call_probe.hpp): the activation bytes per row it measures for each
// call, against what the layers hold by hand, and against what a whole training step of the
// model holds at 20 and 40 times the probe's rows.
#include "parallel/call_probe.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "meta_test_models.hpp"
#include "tensor/host_tensor_bytes.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using namespace meta_test;

// Conv2D 3x3 (8 filters) on 10x10x2 -> BatchNormalization -> relu -> MaxPooling2D -> Flatten ->
// Dense 5: layers that keep more than their outputs for the backward pass.
json conv_model_config() {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "Conv2D"},
               {"config",
                {{"filters", 8},
                 {"kernel_size", {3, 3}},
                 {"padding", "same"},
                 {"input_shape", {10, 10, 2}}}}},
              {{"class_name", "BatchNormalization"}, {"config", json::object()}},
              {{"class_name", "Activation"}, {"config", {{"activation", "relu"}}}},
              {{"class_name", "MaxPooling2D"}, {"config", {{"pool_size", {2, 2}}}}},
              {{"class_name", "Flatten"}, {"config", json::object()}},
              {{"class_name", "Dense"}, {"config", {{"units", 5}}}}}}}}};
}

// What a whole training step (Model::forward and Model::backward, not call by call) of a fresh
// copy of `model` leaves allocated on `rows` rows.
std::int64_t bytes_a_step_holds(const Model& model, std::int64_t rows) {
  std::unique_ptr<Model> copy = model.clone();
  Shape shape{rows};
  for (auto d : copy->input_shape()) shape.push_back(d);
  Tensor x(shape);
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  Shape out{rows};
  for (auto d : copy->output_shape()) out.push_back(d);
  Tensor grad(out);
  grad.fill(0.5f);
  const std::int64_t before = host_tensor_bytes_on_this_thread();
  copy->forward(x, true);
  copy->backward(grad);
  return host_tensor_bytes_on_this_thread() - before;
}

TEST(CallProbe, MeasuresWhatEachLayerHoldsPerRow) {
  // Dense 6->12 relu: its output and the gradient before the relu (12 + 12 floats); the first
  // layer hands no gradient back (its input is the model's; it keeps a view of it, no copy).
  // Dropout: its output and its mask (12 + 12), and the gradient it hands back (12).
  // Dense 12->5, no activation: its output (5) and the gradient it hands back (12).
  const auto model = Model::from_config(model_config(), "model", 1);
  const std::vector<std::int64_t> bytes = measure_call_bytes_per_row(*model);
  ASSERT_EQ(bytes.size(), 3u);
  EXPECT_EQ(bytes[0], (12 + 12) * 4);
  EXPECT_EQ(bytes[1], (12 + 12 + 12) * 4);
  EXPECT_EQ(bytes[2], (5 + 12) * 4);
}

TEST(CallProbe, StepsAtTwentyTimesTheRowsHoldWhatTheProbeSays) {
  for (const json& config : {model_config(), conv_model_config(), residual_model_config(),
                             shared_model_config(), attention_model_config()}) {
    const auto model = Model::from_config(config, "model", 1);
    const std::vector<std::int64_t> bytes = measure_call_bytes_per_row(*model);
    const std::int64_t per_row = std::accumulate(bytes.begin(), bytes.end(), std::int64_t{0});
    std::int64_t outputs = 0;
    for (std::size_t k = 0; k < model->call_count(); ++k)
      outputs += shape_size(model->call_output_shape(k)) * 4;
    EXPECT_GT(per_row, outputs) << config.dump();  // outputs, and more: masks, gradients
    const std::int64_t rows = 20 * kProbeRows;
    const std::int64_t step =
        bytes_a_step_holds(*model, 2 * rows) - bytes_a_step_holds(*model, rows);
    EXPECT_EQ(step, per_row * rows) << config.dump();  // the same bytes per row, exactly
  }
}

TEST(CallProbe, LeavesTheModelAsItWas) {
  const auto model = Model::from_config(conv_model_config(), "model", 1);
  const auto before = model->clone();
  const std::int64_t held = host_tensor_bytes_on_this_thread();
  measure_call_bytes_per_row(*model);
  EXPECT_EQ(host_tensor_bytes_on_this_thread(), held);  // the copies are gone
  for (std::size_t l = 0; l < model->layer_count(); ++l) {
    auto a = model->layer(l).parameters(), b = before->layer(l).parameters();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t p = 0; p < a.size(); ++p)
      for (std::int64_t i = 0; i < a[p]->value.size(); ++i)
        ASSERT_EQ(a[p]->value[i], b[p]->value[i]) << model->layer(l).name();
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
