// RandomFlip: in training each sample comes out as itself or mirrored along the axes its mode
// allows, each flip with probability one half; the draws of a sample do not depend on how the
// batch is split (its global index keys them); the gradient is the flip's transpose; the
// identity at inference; configs round-trip and bad ones name their key.
#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.hpp"
#include "nn/random_flip.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

constexpr std::int64_t kRows = 3, kCols = 4, kChannels = 2, kCell = kRows * kCols * kChannels;

// Sample n of `x` read with the given flips.
float flipped(const Tensor& x, std::int64_t n, bool mirror, bool upside_down, std::int64_t i,
              std::int64_t j, std::int64_t c) {
  const std::int64_t from_i = upside_down ? kRows - 1 - i : i, from_j = mirror ? kCols - 1 - j : j;
  return x[n * kCell + (from_i * kCols + from_j) * kChannels + c];
}

// Which of the four flips sample n of y is of sample n of x: bit 0 mirror, bit 1 upside down;
// -1 for none of them.
int flip_of(const Tensor& x, const Tensor& y, std::int64_t n) {
  for (int f = 0; f < 4; ++f) {
    bool same = true;
    for (std::int64_t i = 0; i < kRows; ++i)
      for (std::int64_t j = 0; j < kCols; ++j)
        for (std::int64_t c = 0; c < kChannels; ++c)
          same = same && y[n * kCell + (i * kCols + j) * kChannels + c] ==
                             flipped(x, n, f & 1, f & 2, i, j, c);
    if (same) return f;
  }
  return -1;
}

TEST(RandomFlip, EachSampleIsFlippedAlongItsModesAxesHalfTheTime) {
  const std::int64_t batch = 800;
  const Tensor x = test::random_tensor({batch, kRows, kCols, kChannels}, 1);
  for (const char* mode : {"horizontal", "vertical", "horizontal_and_vertical"}) {
    SCOPED_TRACE(mode);
    RandomFlip flip("flip", mode, 11);
    Rng init(0);
    EXPECT_EQ(flip.build({kRows, kCols, kChannels}, init), (Shape{kRows, kCols, kChannels}));
    const Tensor y = flip.forward(x, true).clone();
    int counts[4] = {0, 0, 0, 0};
    for (std::int64_t n = 0; n < batch; ++n) {
      const int f = flip_of(x, y, n);
      ASSERT_GE(f, 0) << "sample " << n << " is no flip of its input";
      ++counts[f];
    }
    const int mirrored = counts[1] + counts[3], upside_down = counts[2] + counts[3];
    const std::string m = mode;
    // 800 fair draws: a standard deviation of about 14.
    EXPECT_NEAR(mirrored, m == "vertical" ? 0 : 400, m == "vertical" ? 0 : 60);
    EXPECT_NEAR(upside_down, m == "horizontal" ? 0 : 400, m == "horizontal" ? 0 : 60);
    if (m == "horizontal_and_vertical") {
      EXPECT_NEAR(counts[3], 200, 50);  // the two flips independent
    }
  }
}

TEST(RandomFlip, ASamplesFlipDependsOnItsGlobalIndexNotOnTheSplit) {
  const Tensor x = test::random_tensor({10, kRows, kCols, kChannels}, 2);
  RandomFlip whole("flip", "horizontal_and_vertical", 5), part("flip", "horizontal_and_vertical", 5);
  Rng a(0), b(0);
  whole.build({kRows, kCols, kChannels}, a);
  part.build({kRows, kCols, kChannels}, b);
  const Tensor all = whole.forward(x, true).clone();
  part.set_sample_offset(4);
  const Tensor rows = part.forward(Tensor::view(x, 4 * kCell, {6, kRows, kCols, kChannels}), true)
                          .clone();
  for (std::int64_t e = 0; e < rows.size(); ++e) ASSERT_EQ(rows[e], all[4 * kCell + e]) << e;
  // The next training forward draws anew.
  const Tensor again = whole.forward(x, true).clone();
  int differ = 0;
  for (std::int64_t n = 0; n < 10; ++n) differ += flip_of(x, all, n) != flip_of(x, again, n);
  EXPECT_GT(differ, 0);
  EXPECT_EQ(whole.random_state()[1], 2u);
}

TEST(RandomFlip, TheGradientIsTheFlipsTransposeAndInferenceIsTheIdentity) {
  RandomFlip flip("flip", "horizontal_and_vertical", 3);
  Rng init(0);
  flip.build({kRows, kCols, kChannels}, init);
  const Tensor x = test::random_tensor({16, kRows, kCols, kChannels}, 3);
  const Tensor y = flip.forward(x, true).clone();
  const Tensor g = test::random_tensor(y.shape(), 4);
  const Tensor dx = flip.backward(g, true).clone();
  double forward = 0, adjoint = 0;
  for (std::int64_t e = 0; e < x.size(); ++e) {
    forward += static_cast<double>(y[e]) * g[e];
    adjoint += static_cast<double>(x[e]) * dx[e];
  }
  EXPECT_NEAR(forward, adjoint, 1e-9 * (1 + std::fabs(forward)));
  EXPECT_EQ(flip.forward(x, false).data(), x.data());
  EXPECT_EQ(flip.backward(g, true).data(), g.data());
}

json model_with(const json& flip_config, const json& input_shape) {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", input_shape}}}},
              {{"class_name", "RandomFlip"}, {"config", flip_config}},
              {{"class_name", "Flatten"}, {"config", json::object()}}}}}}};
}

std::string error_of(const json& flip_config, const json& input_shape) {
  try {
    Model::from_config(model_with(flip_config, input_shape), "model", 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RandomFlip, ConfigsRoundTripAndBadOnesNameTheirKey) {
  const json images = {nullptr, 4, 4, 1};
  auto m = Model::from_config(model_with({{"mode", "vertical"}, {"seed", 9}}, images), "model", 1);
  const json c = m->config()["config"]["layers"][1]["config"];
  EXPECT_EQ(c["mode"], "vertical");
  EXPECT_EQ(c["seed"], 9);
  EXPECT_EQ(m->layer(0).name(), "random_flip");
  EXPECT_EQ(error_of(json::object(), images), "");  // Keras' default mode
  EXPECT_NE(error_of({{"mode", "diagonal"}}, images).find("layers[1].config.mode"),
            std::string::npos);
  EXPECT_NE(error_of({{"data_format", "channels_first"}}, images).find("config.data_format"),
            std::string::npos);
  EXPECT_NE(error_of({{"seed", -1}}, images).find("config.seed"), std::string::npos);
  EXPECT_NE(error_of(json::object(), {nullptr, 16}).find("expects images"), std::string::npos);
}

}  // namespace
}  // namespace tandem::nn
