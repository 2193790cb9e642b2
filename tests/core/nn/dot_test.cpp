// Dot's normalize (cosine proximity, nn/dot.hpp): each pair's cosine by hand, and the floor each
// Keras puts under a tiny vector's norm — Keras 3's ops.normalize bounds the inverse norm by
// 1 / 1e-7, tf.keras 2's l2_normalize floors the square sum at 1e-12 — so a vector of norm 5e-7
// is scaled to unit length in a Keras 3 model and to a tenth of it in a Keras 2 one. (PyTorch's
// normalize checks the values and the gradients: LayerOracle.MergingLayersMatchPyTorch.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// Inputs a and b of `n` values each -> Dot(axes=1, normalize) -> its (batch, 1) output.
json cosine_model(int n, const char* keras_version) {
  const json input = {{"class_name", "InputLayer"},
                      {"config", {{"batch_input_shape", {nullptr, n}}}}};
  json a = input, b = input;
  a["name"] = a["config"]["name"] = "a";
  b["name"] = b["config"]["name"] = "b";
  a["inbound_nodes"] = b["inbound_nodes"] = json::array();
  const json dot = {
      {"class_name", "Dot"},
      {"name", "cos"},
      {"config", {{"name", "cos"}, {"axes", 1}, {"normalize", true}}},
      {"inbound_nodes", {{{"a", 0, 0, json::object()}, {"b", 0, 0, json::object()}}}}};
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "m"},
            {"layers", {a, b, dot}},
            {"input_layers", {{"a", 0, 0}, {"b", 0, 0}}},
            {"output_layers", {{"cos", 0, 0}}}}},
          {"keras_version", keras_version}};
}

TEST(DotNormalize, GivesEachPairsCosine) {
  auto model = Model::from_config(cosine_model(3, "3.3.3"), "model", 1);
  // Rows [a, b]: (1, 2, 2)·(2, 0, 1) = 4 over 3·√5; (1, 0, 0)·(-3, 0, 0); (1, 1, 0)·(0, 0, 7).
  const Tensor x =
      Tensor::from_vector({3, 6}, {1, 2, 2, 2, 0, 1, 1, 0, 0, -3, 0, 0, 1, 1, 0, 0, 0, 7});
  const Tensor& y = model->forward(x, false);
  ASSERT_EQ(y.size(), 3);
  EXPECT_NEAR(y[0], 4.0 / (3.0 * std::sqrt(5.0)), 1e-6);
  EXPECT_NEAR(y[1], -1.0, 1e-6);
  EXPECT_NEAR(y[2], 0.0, 1e-6);
  EXPECT_EQ(model->config()["config"]["layers"][2]["config"]["normalize"], true);
}

TEST(DotNormalize, FloorsATinyNormAsEachKerasDoes) {
  // a = (3e-7, 4e-7): Σ a² = 2.5e-13, between Keras 3's floor (1e-14) and Keras 2's (1e-12).
  const Tensor x = Tensor::from_vector({1, 4}, {3e-7f, 4e-7f, 1, 0});
  auto keras3 = Model::from_config(cosine_model(2, "3.3.3"), "model", 1);
  EXPECT_NEAR(keras3->forward(x, false)[0], 0.6, 1e-6);  // a / |a|, then · (1, 0)
  auto keras2 = Model::from_config(cosine_model(2, "2.15.0"), "model", 1);
  EXPECT_NEAR(keras2->forward(x, false)[0], 0.3, 1e-6);  // a · 1e6
}

TEST(DotNormalize, AKeyOfAnotherTypeIsRefusedAtItsPlace) {
  json config = cosine_model(2, "3.3.3");
  config["config"]["layers"][2]["config"]["normalize"] = "yes";
  try {
    Model::from_config(config, "model", 1);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("normalize"), std::string::npos) << e.what();
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
