// Keras' activity_regularizer in the model: the penalty is of the layer's activated output (a
// Conv2D relu whose relu would otherwise move into the MaxPooling2D after it keeps it), of every
// call of a shared layer, written back into the model's config, and nothing without one. The
// penalty in the loss and its gradient against PyTorch: tests/e2e/activity_regularizer_cli_test.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/ops.hpp"
#include "tandem/model.hpp"
#include "gradient_check.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

double penalty_of(Model& m, const Tensor& x) {
  m.forward_outputs(x, false);
  auto sums = backend::cpu_backend().sums();
  m.enqueue_activity_penalties(*sums, 0.0f);
  double total = 0;
  for (double v : sums->read()) total += v;
  return total;
}

json conv_layer(bool regularized) {
  json c = {{"name", "conv"}, {"filters", 3}, {"kernel_size", 3}, {"activation", "relu"}};
  if (regularized) c["activity_regularizer"] = {{"class_name", "L1"}, {"config", {{"l1", 0.5}}}};
  return {{"class_name", "Conv2D"}, {"config", c}};
}

TEST(ActivityRegularizer, TheRelusOutputIsPenalizedEvenWhereTheReluWouldMoveToThePooling) {
  json stack = {{"class_name", "Sequential"},
                {"config",
                 {{"layers",
                   {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 6, 6, 2}}}}},
                    conv_layer(true),
                    {{"class_name", "MaxPooling2D"}, {"config", {{"pool_size", 2}}}},
                    {{"class_name", "Flatten"}, {"config", json::object()}},
                    {{"class_name", "Dense"}, {"config", {{"units", 2}}}}}}}}};
  auto model = Model::from_config(stack, "model", 4);
  json conv_only = stack;
  conv_only["config"]["layers"] = {stack["config"]["layers"][0], conv_layer(false)};
  auto conv = Model::from_config(conv_only, "model", 4);
  conv->layer(0).parameters()[0]->value.copy_from(model->layer(0).parameters()[0]->value);
  const Tensor x = test::random_tensor({3, 6, 6, 2}, 5);
  const Tensor& y = conv->forward(x, false);  // relu'd: no negative value
  double l1 = 0;
  for (std::int64_t i = 0; i < y.size(); ++i) l1 += 0.5 * std::fabs(y[i]);
  // Had the relu moved into the pooling, the conv's output would keep its negative values and
  // their magnitudes would count too.
  EXPECT_NEAR(penalty_of(*model, x), l1, 1e-5 * l1);
  EXPECT_TRUE(model->has_activity_regularizers());
  EXPECT_FALSE(conv->has_activity_regularizers());
}

TEST(ActivityRegularizer, EveryCallOfASharedLayerIsPenalizedAndTheConfigKeepsIt) {
  // h1 = d(x), h2 = d(h1) with one Dense d carrying L2; the penalty is of h1 and of h2.
  const json model_config = json::parse(R"({"class_name": "Functional", "config": {"name": "s",
    "layers": [
      {"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, 4]},
       "inbound_nodes": []},
      {"class_name": "Dense", "name": "d", "config": {"name": "d", "units": 4, "activation": "tanh",
       "activity_regularizer": {"class_name": "L2", "config": {"l2": 0.25}}},
       "inbound_nodes": [[["x", 0, 0, {}]], [["d", 0, 0, {}]]]},
      {"class_name": "Add", "name": "add", "config": {"name": "add"},
       "inbound_nodes": [[["d", 0, 0, {}], ["d", 1, 0, {}]]]}],
    "input_layers": [["x", 0, 0]], "output_layers": [["add", 0, 0]]}})");
  auto m = Model::from_config(model_config, "model", 9);
  const Tensor x = test::random_tensor({5, 4}, 6);
  const Tensor& w = m->layer(0).parameters()[0]->value;
  const Tensor& b = m->layer(0).parameters()[1]->value;
  double expected = 0;
  for (std::int64_t r = 0; r < 5; ++r) {
    double h1[4], h2[4];
    for (int j = 0; j < 4; ++j) {
      double s = b[j];
      for (int i = 0; i < 4; ++i) s += x[r * 4 + i] * w[i * 4 + j];
      h1[j] = std::tanh(s);
    }
    for (int j = 0; j < 4; ++j) {
      double s = b[j];
      for (int i = 0; i < 4; ++i) s += h1[i] * w[i * 4 + j];
      h2[j] = std::tanh(s);
    }
    for (int j = 0; j < 4; ++j) expected += 0.25 * (h1[j] * h1[j] + h2[j] * h2[j]);
  }
  EXPECT_NEAR(penalty_of(*m, x), expected, 1e-5 * expected);
  const json written = m->config()["config"]["layers"][1]["config"]["activity_regularizer"];
  EXPECT_EQ(written["class_name"], "L2");
  EXPECT_EQ(written["config"]["l2"], 0.25);
  // And it reads back the same.
  auto again = Model::from_config(m->config(), "model", 9);
  EXPECT_NEAR(penalty_of(*again, x), expected, 1e-5 * expected);
}

}  // namespace
}  // namespace tandem
