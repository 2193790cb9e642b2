// Keras 3's adaptive poolings (nn/adaptive_pooling.hpp): windows by hand where they overlap
// (5 steps to 3: [0, 2), [1, 4), [3, 5)), their gradients (the overlapped cells get both
// windows'), a tie's and a NaN's maximum, the average's gradient against finite differences over
// a volume, the configs written back and refusals at their place. (Against torch's adaptive
// pools: LayerOracle; ONNX: OnnxExportOracle.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data(), t.data() + t.size());
}

std::vector<float> pool(const char* cls, json output_size, const Shape& sample,
                        const std::vector<float>& x, const std::vector<float>& dy,
                        std::vector<float>* dx) {
  auto layer = test::make_layer(cls, {{"output_size", output_size}});
  Rng init(1);
  const Shape pooled = layer->build(sample, init);
  Shape shape{1};
  shape.insert(shape.end(), sample.begin(), sample.end());
  const std::vector<float> y = values(layer->forward(Tensor::from_vector(shape, x), true));
  Shape out_shape{1};
  out_shape.insert(out_shape.end(), pooled.begin(), pooled.end());
  *dx = values(layer->backward(Tensor::from_vector(out_shape, dy), true));
  return y;
}

TEST(AdaptivePooling, OverlappingWindowsByHand) {
  std::vector<float> dx;
  // Average: (1+2)/2, (2+3+4)/3, (4+5)/2; each window's gradient shared by its cells, the
  // overlapped cells 1 and 3 taking two windows' shares.
  EXPECT_EQ(pool("AdaptiveAveragePooling1D", 3, {5, 1}, {1, 2, 3, 4, 5}, {6, 3, 6}, &dx),
            (std::vector<float>{1.5f, 3.0f, 4.5f}));
  EXPECT_EQ(dx, (std::vector<float>{3, 4, 1, 4, 3}));
  // Maximum: 2, 4, 5; the gradient to each window's maximum (cell 3 is the second's and the
  // third's is cell 4).
  EXPECT_EQ(pool("AdaptiveMaxPooling1D", 3, {5, 1}, {1, 2, 3, 4, 5}, {1, 2, 3}, &dx),
            (std::vector<float>{2, 4, 5}));
  EXPECT_EQ(dx, (std::vector<float>{0, 1, 0, 2, 3}));
  // A tie goes to the first cell of the window in scan order: cell 0 in [0, 2), cell 1 in
  // [1, 4), cell 3 in [3, 5); a NaN wins its windows.
  pool("AdaptiveMaxPooling1D", 3, {5, 1}, {3, 3, 1, 1, 1}, {1, 1, 1}, &dx);
  EXPECT_EQ(dx, (std::vector<float>{1, 1, 0, 1, 0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> y =
      pool("AdaptiveMaxPooling1D", 3, {5, 1}, {1, nan, 7, 0, 0}, {1, 1, 1}, &dx);
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(dx, (std::vector<float>{0, 2, 0, 1, 0}));
  // 2-D, 3x4 to 2x3, two channels apart: rows [0, 2), [1, 3); columns [0, 2), [1, 3), [2, 4).
  std::vector<float> image(24);
  for (int i = 0; i < 24; ++i) image[i] = static_cast<float>(i % 2 == 0 ? i / 2 : -(i / 2));
  const std::vector<float> maxima =
      pool("AdaptiveMaxPooling2D", json{2, 3}, {3, 4, 2}, image, std::vector<float>(12, 1), &dx);
  // Channel 0 holds 0..11 row by row: each window's maximum is its bottom-right cell; channel 1
  // holds their negatives: its top-left.
  EXPECT_EQ(maxima, (std::vector<float>{5, 0, 6, -1, 7, -2, 9, -4, 10, -5, 11, -6}));
}

// Σ y·w over an average pooling of a (3, 5, 4, 2) volume to (2, 3, 3): linear, so central
// differences of the sum are exact to float rounding.
TEST(AdaptivePooling, TheAverageGradientMatchesFiniteDifferences) {
  auto layer = test::make_layer("AdaptiveAveragePooling3D", {{"output_size", {2, 3, 3}}});
  Rng init(1);
  EXPECT_EQ(layer->build({3, 5, 4, 2}, init), (Shape{2, 3, 3, 2}));
  const Tensor x = test::random_tensor({2, 3, 5, 4, 2}, 4);
  const Tensor w = test::random_tensor({2, 2, 3, 3, 2}, 5);
  const Tensor y = layer->forward(x, true).clone();
  const Tensor dx = layer->backward(w, true).clone();
  const auto loss = [&](const std::vector<double>& v) {
    Tensor t({2, 3, 5, 4, 2});
    for (std::int64_t i = 0; i < t.size(); ++i)
      t[i] = static_cast<float>(v[static_cast<std::size_t>(i)]);
    const Tensor& out = layer->forward(t, true);
    double total = 0;
    for (std::int64_t i = 0; i < out.size(); ++i) total += static_cast<double>(out[i]) * w[i];
    return total;
  };
  test::expect_close(test::to_double(dx), test::numeric_gradient(loss, test::to_double(x), 1e-2),
                     1e-4, 1e-5, "dx");
}

TEST(AdaptivePooling, ConfigsReadBackAndBadValuesAreNamed) {
  const json written = test::make_layer("AdaptiveMaxPooling2D", {{"output_size", 7}})->config();
  EXPECT_EQ(written["output_size"], json({7, 7}));
  EXPECT_EQ(written["data_format"], "channels_last");
  EXPECT_EQ(test::layer_config_error("AdaptiveMaxPooling2D", written), "(no error)");
  for (const auto& [config, message] : std::vector<std::pair<json, std::string>>{
           {{{"output_size", 0}},
            "'layer.config.output_size': expected a positive integer or a "
            "list of 2 of them, got 0"},
           {{{"output_size", {3}}},
            "'layer.config.output_size': expected a positive integer or a "
            "list of 2 of them, got [3]"},
           {{{"output_size", "7"}}, "'layer.config.output_size'"},
           {json::object(), "'layer.config.output_size'"},
           {{{"output_size", 2}, {"data_format", "channels_first"}}, "'layer.config.data_format'"}})
    EXPECT_NE(test::layer_config_error("AdaptiveMaxPooling2D", config).find(message),
              std::string::npos)
        << config.dump();
  auto layer = test::make_layer("AdaptiveAveragePooling2D", {{"output_size", 2}});
  Rng init(1);
  try {
    layer->build({8, 3}, init);
    ADD_FAILURE() << "a sequence was taken";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("(AdaptiveAveragePooling2D) pools inputs of 2 spatial "
                                         "axes and channels last, got (None, 8, 3)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
