// Keras' two root-mean-square normalizations (nn/layer_normalization.hpp): RMSNormalization,
// x / sqrt(mean(x²) + epsilon) · scale, and LayerNormalization(rms_scaling=True),
// x / sqrt(var + epsilon) · gamma. Values by hand, the gradients (input and weight) against
// finite differences of the definitions written in double, the weights each has, the configs
// written back, refusals at their place, and a mask ending at RMSNormalization as Keras 3 ends
// it. (Outputs and gradients against torch: tests/oracle; ONNX: OnnxExportOracle.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data(), t.data() + t.size());
}

TEST(RmsNormalization, DividesByTheRootMeanSquareByHand) {
  auto layer = test::make_layer("RMSNormalization", {{"epsilon", 3.5}});
  Rng init(1);
  EXPECT_EQ(layer->build({2}, init), (Shape{2}));
  ASSERT_EQ(layer->parameters().size(), 1u);
  EXPECT_EQ(layer->parameters()[0]->name, "scale");
  EXPECT_EQ(values(layer->parameters()[0]->value), (std::vector<float>{1, 1}));
  // (3, 4): mean of squares 12.5, + 3.5 = 16, so y = x / 4; (-6, 8): 50 + 3.5 -> x / sqrt(53.5).
  // The mean is not taken out: (-6, 8) is not centred on 1.
  const Tensor x = Tensor::from_vector({2, 2}, {3, 4, -6, 8});
  const std::vector<float> y = values(layer->forward(x, true));
  EXPECT_FLOAT_EQ(y[0], 0.75f);
  EXPECT_FLOAT_EQ(y[1], 1.0f);
  EXPECT_FLOAT_EQ(y[2], static_cast<float>(-6 / std::sqrt(53.5)));
  EXPECT_FLOAT_EQ(y[3], static_cast<float>(8 / std::sqrt(53.5)));
}

TEST(RmsNormalization, LayerNormalizationsRmsScalingKeepsTheMeanInByHand) {
  auto layer = test::make_layer("LayerNormalization",
                                {{"rms_scaling", true}, {"scale", false}, {"epsilon", 3.0}});
  Rng init(1);
  layer->build({2}, init);
  // gamma whatever `scale` says, no beta (Keras' build).
  ASSERT_EQ(layer->parameters().size(), 1u);
  EXPECT_EQ(layer->parameters()[0]->name, "gamma");
  layer->parameters()[0]->value[1] = 2.0f;
  // (1, 3): mean 2, variance 1, + 3 = 4: y = x / 2 · gamma = (0.5, 3); (5, 5): variance 0,
  // y = 5 / sqrt(3) · gamma.
  const std::vector<float> y =
      values(layer->forward(Tensor::from_vector({2, 2}, {1, 3, 5, 5}), true));
  EXPECT_FLOAT_EQ(y[0], 0.5f);
  EXPECT_FLOAT_EQ(y[1], 3.0f);
  EXPECT_FLOAT_EQ(y[2], static_cast<float>(5 / std::sqrt(3.0)));
  EXPECT_FLOAT_EQ(y[3], static_cast<float>(10 / std::sqrt(3.0)));
}

// Σ y·w (w fixed) as a function of x and of the weight, against central differences of the
// definition in double, rows of 5 (3 x 4 rows), with a weight drawn at random.
TEST(RmsNormalization, GradientsMatchFiniteDifferences) {
  for (const bool rms_normalization : {true, false}) {
    const std::string what = rms_normalization ? "RMSNormalization" : "rms_scaling";
    auto layer = rms_normalization ? test::make_layer("RMSNormalization", {{"epsilon", 0.1}})
                                   : test::make_layer("LayerNormalization",
                                                      {{"rms_scaling", true}, {"epsilon", 0.1}});
    Rng init(1);
    layer->build({4, 5}, init);
    Parameter& weight = *layer->parameters()[0];
    weight.value = test::random_tensor({5}, 7, 0.5f, 2.0f);
    const Tensor x = test::random_tensor({3, 4, 5}, 5, -2.0f, 3.0f);
    const Tensor w = test::random_tensor({3, 4, 5}, 6);
    layer->forward(x, true);
    weight.grad.fill(0.0f);
    const Tensor dx = layer->backward(w, true).clone();
    const auto loss = [&](const std::vector<double>& v, const std::vector<double>& g) {
      double total = 0;
      for (std::size_t row = 0; row < v.size() / 5; ++row) {
        double mean = 0, squares = 0;
        for (std::size_t c = 0; c < 5; ++c) mean += v[row * 5 + c] / 5;
        for (std::size_t c = 0; c < 5; ++c) {
          const double d = v[row * 5 + c] - (rms_normalization ? 0.0 : mean);
          squares += d * d / 5;
        }
        for (std::size_t c = 0; c < 5; ++c)
          total += v[row * 5 + c] / std::sqrt(squares + 0.1) * g[c] *
                   w[static_cast<std::int64_t>(row * 5 + c)];
      }
      return total;
    };
    const std::vector<double> xs = test::to_double(x), gs = test::to_double(weight.value);
    test::expect_close(
        test::to_double(dx),
        test::numeric_gradient([&](const std::vector<double>& v) { return loss(v, gs); }, xs), 1e-4,
        1e-5, what + " dx");
    test::expect_close(
        test::to_double(weight.grad),
        test::numeric_gradient([&](const std::vector<double>& g) { return loss(xs, g); }, gs), 1e-4,
        1e-5, what + " d(weight)");
  }
}

TEST(RmsNormalization, ConfigsReadBackAndBadValuesAreNamed) {
  const json rms =
      test::make_layer("RMSNormalization", {{"axis", -1}, {"epsilon", 1e-5}})->config();
  EXPECT_EQ(rms["axis"], -1);
  EXPECT_EQ(rms["epsilon"], 1e-5);
  EXPECT_FALSE(rms.contains("center"));
  EXPECT_EQ(test::layer_config_error("RMSNormalization", rms), "(no error)");
  EXPECT_EQ(test::make_layer("RMSNormalization", json::object())->config()["epsilon"], 1e-6);
  const json ln = test::make_layer("LayerNormalization", {{"rms_scaling", true}})->config();
  EXPECT_EQ(ln["rms_scaling"], true);
  EXPECT_EQ(test::layer_config_error("LayerNormalization", ln), "(no error)");
  EXPECT_NE(test::layer_config_error("RMSNormalization", {{"epsilon", 0}})
                .find("'layer.config.epsilon': expected a positive number, got 0"),
            std::string::npos);
  EXPECT_NE(test::layer_config_error("RMSNormalization", {{"axis", "last"}})
                .find("'layer.config.axis': only the last axis is supported"),
            std::string::npos);
  EXPECT_NE(test::layer_config_error("RMSNormalization", {{"center", true}}).find("center"),
            std::string::npos);
  EXPECT_NE(test::layer_config_error("LayerNormalization", {{"rms_scaling", "yes"}})
                .find("'layer.config.rms_scaling'"),
            std::string::npos);
  auto layer = test::make_layer("RMSNormalization", {{"axis", 1}});
  Rng init(1);
  try {
    layer->build({4, 2}, init);
    ADD_FAILURE() << "axis 1 of (None, 4, 2) was taken";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("(RMSNormalization): axis 1 is not the last axis of "
                                         "inputs (None, 4, 2)"),
              std::string::npos)
        << e.what();
  }
}

// Keras 3 gives a layer without mask support no mask: after an RMSNormalization the LSTM sees
// every step, padding included, so its output differs from the one that skips them.
TEST(RmsNormalization, AMaskEndsThere) {
  const auto model = [](int steps, bool rms) {
    json layers = json::array(
        {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, steps}}}}},
         {{"class_name", "Embedding"},
          {"config",
           {{"name", "emb"}, {"input_dim", 9}, {"output_dim", 3}, {"mask_zero", true}}}}});
    layers.push_back(rms ? json{{"class_name", "RMSNormalization"}, {"config", {{"name", "norm"}}}}
                         : json{{"class_name", "LayerNormalization"},
                                {"config", {{"name", "norm"}, {"rms_scaling", true}}}});
    layers.push_back({{"class_name", "LSTM"}, {"config", {{"name", "rnn"}, {"units", 2}}}});
    return json{{"class_name", "Sequential"}, {"config", {{"name", "m"}, {"layers", layers}}}};
  };
  // The same weights on [3, 5, 0, 0] and on [3, 5]: LayerNormalization passes the mask (the
  // padding is skipped, the outputs agree); after RMSNormalization the LSTM reads the padding.
  for (const bool rms : {false, true}) {
    auto padded = Model::from_config(model(4, rms), "model", 1);
    auto cut = Model::from_config(model(2, rms), "model", 2);
    cut->copy_weights_from(*padded);
    const std::vector<float> full =
        values(padded->forward(Tensor::from_vector({1, 4}, {3, 5, 0, 0}), false));
    const std::vector<float> kept =
        values(cut->forward(Tensor::from_vector({1, 2}, {3, 5}), false));
    ASSERT_EQ(full.size(), kept.size());
    float most = 0;
    for (std::size_t i = 0; i < full.size(); ++i)
      most = std::max(most, std::abs(full[i] - kept[i]));
    if (rms)
      EXPECT_GT(most, 1e-4f) << "RMSNormalization passed the mask on";
    else
      EXPECT_LT(most, 1e-6f) << "LayerNormalization dropped the mask";
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
