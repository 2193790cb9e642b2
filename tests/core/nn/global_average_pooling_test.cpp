#include "nn/global_average_pooling.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// sum(w * mean over rows and cols), in double.
double reference_loss(const std::vector<double>& x, const std::vector<double>& w,
                      std::int64_t batch, std::int64_t cells, std::int64_t channels) {
  double loss = 0;
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t c = 0; c < channels; ++c) {
      double sum = 0;
      for (std::int64_t i = 0; i < cells; ++i) sum += x[(n * cells + i) * channels + c];
      loss += w[n * channels + c] * sum / static_cast<double>(cells);
    }
  return loss;
}

TEST(GlobalAveragePooling2D, ForwardAndGradientMatchDoubleReference) {
  for (bool keepdims : {false, true}) {
    GlobalAveragePooling gap("gap", 2, keepdims);
    Rng init(0);
    EXPECT_EQ(gap.build({7, 5, 3}, init), keepdims ? (Shape{1, 1, 3}) : (Shape{3}));
    EXPECT_TRUE(gap.parameters().empty());
    Tensor x = test::random_tensor({2, 7, 5, 3}, 1);
    const Tensor& y = gap.forward(x, true);
    EXPECT_EQ(y.shape(), keepdims ? (Shape{2, 1, 1, 3}) : (Shape{2, 3}));
    Tensor w = test::random_tensor(y.shape(), 2);
    const auto xd = test::to_double(x), wd = test::to_double(w);
    double tandem_loss = 0;
    for (std::int64_t i = 0; i < y.size(); ++i) tandem_loss += static_cast<double>(y[i]) * w[i];
    EXPECT_NEAR(tandem_loss, reference_loss(xd, wd, 2, 35, 3), 1e-5);
    const Tensor& gx = gap.backward(w, true);
    ASSERT_EQ(gx.shape(), x.shape());
    test::expect_close(
        test::to_double(gx),
        test::numeric_gradient([&](const auto& v) { return reference_loss(v, wd, 2, 35, 3); }, xd),
        1e-4, 1e-6, "d/dx");
    EXPECT_TRUE(gap.backward(w, false).empty());
  }
}

// GlobalAveragePooling1D: the mean over the steps of (batch, steps, features), the same sums.
TEST(GlobalAveragePooling1D, ForwardAndGradientMatchDoubleReference) {
  for (bool keepdims : {false, true}) {
    GlobalAveragePooling gap("gap1d", 1, keepdims);
    EXPECT_EQ(gap.class_name(), "GlobalAveragePooling1D");
    Rng init(0);
    EXPECT_EQ(gap.build({9, 4}, init), keepdims ? (Shape{1, 4}) : (Shape{4}));
    Tensor x = test::random_tensor({3, 9, 4}, 3);
    const Tensor& y = gap.forward(x, true);
    EXPECT_EQ(y.shape(), keepdims ? (Shape{3, 1, 4}) : (Shape{3, 4}));
    Tensor w = test::random_tensor(y.shape(), 4);
    const auto xd = test::to_double(x), wd = test::to_double(w);
    double tandem_loss = 0;
    for (std::int64_t i = 0; i < y.size(); ++i) tandem_loss += static_cast<double>(y[i]) * w[i];
    EXPECT_NEAR(tandem_loss, reference_loss(xd, wd, 3, 9, 4), 1e-5);
    const Tensor& gx = gap.backward(w, true);
    ASSERT_EQ(gx.shape(), x.shape());
    test::expect_close(
        test::to_double(gx),
        test::numeric_gradient([&](const auto& v) { return reference_loss(v, wd, 3, 9, 4); }, xd),
        1e-4, 1e-6, "d/dx");
  }
  GlobalAveragePooling image_input("gap1d", 1, false);
  Rng init(0);
  try {
    image_input.build({4, 4, 8}, init);
    FAIL() << "GlobalAveragePooling1D takes (batch, steps, features)";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("'gap1d' (GlobalAveragePooling1D) expects inputs "
                                         "(None, steps, channels), got (None, 4, 4, 8)"),
              std::string::npos)
        << e.what();
  }
}

TEST(GlobalAveragePooling2D, BadShapesNameTheLayer) {
  GlobalAveragePooling gap("head", 2, false);
  Rng init(0);
  try {
    gap.build({64}, init);
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("'head' (GlobalAveragePooling2D)"), std::string::npos);
  }
  gap.build({4, 4, 8}, init);
  Tensor wrong({2, 4, 4, 3});
  try {
    gap.forward(wrong, true);
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("'head'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("(None, 4, 4, 8)"), std::string::npos) << e.what();
  }
}

TEST(GlobalAveragePooling2D, ParsesKerasConfigs) {
  auto model = [](const json& cfg) {
    json c = cfg;
    c["input_shape"] = {5, 5, 16};
    return json{
        {"class_name", "Sequential"},
        {"config", {{"layers", {{{"class_name", "GlobalAveragePooling2D"}, {"config", c}}}}}}};
  };
  auto m = Model::from_config(model(json::object()), "model", 0);
  EXPECT_EQ(m->layer(0).name(), "global_average_pooling2d");
  EXPECT_EQ(m->output_shape(), (Shape{16}));
  auto k =
      Model::from_config(model({{"keepdims", true}, {"data_format", "channels_last"}}), "model", 0);
  EXPECT_EQ(k->output_shape(), (Shape{1, 1, 16}));
  EXPECT_EQ(k->layer(0).config()["keepdims"], true);
  try {
    Model::from_config(model({{"data_format", "channels_first"}}), "model", 0);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'model.config.layers[0].config.data_format'"),
              std::string::npos)
        << e.what();
  }
  try {
    Model::from_config(model({{"keepdims", "yes"}}), "model", 0);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'model.config.layers[0].config.keepdims'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::nn
