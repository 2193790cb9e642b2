// Resizing (nn/resizing.hpp): values by hand for a 2x2 image doubled (tf.image.resize's
// half-pixel bilinear, edges clamped) and nearest, the centred window of crop_to_aspect_ratio,
// the fill of pad_to_aspect_ratio,
// the gradient as the resize's adjoint, the config written back, refusals at their key
// (values and gradients against PyTorch's interpolate: tests/oracle).
#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

Tensor resized(const json& config, const Tensor& x) {
  auto layer = test::make_layer("Resizing", config);
  Rng init(1);
  layer->build({x.dim(1), x.dim(2), x.dim(3)}, init);
  return layer->forward(x, false).clone();
}

TEST(Resizing, ComputesTfImageResizeByHand) {
  // [[0, 1], [2, 3]] doubled: source points (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25,
  // clamped to [0, 1], so each row reads 0, 0.25, 0.75, 1 of the way across.
  const Tensor x = Tensor::from_vector({1, 2, 2, 1}, {0, 1, 2, 3});
  const Tensor up = resized({{"height", 4}, {"width", 4}}, x);
  const std::vector<float> along{0, 0.25f, 0.75f, 1};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c)
      EXPECT_FLOAT_EQ(up[r * 4 + c],
                      2 * along[static_cast<std::size_t>(r)] + along[static_cast<std::size_t>(c)])
          << r << ", " << c;
  // Nearest: floor((i + 0.5) / 2) = 0, 0, 1, 1.
  const Tensor near = resized({{"height", 4}, {"width", 4}, {"interpolation", "nearest"}}, x);
  const std::vector<float> rows{0, 0, 1, 1};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c)
      EXPECT_EQ(near[r * 4 + c],
                2 * rows[static_cast<std::size_t>(r)] + rows[static_cast<std::size_t>(c)]);
  // A 2x4 image to 2x2 with crop_to_aspect_ratio: its centred 2x2 window (columns 1 and 2).
  const Tensor wide = Tensor::from_vector({1, 2, 4, 1}, {0, 1, 2, 3, 4, 5, 6, 7});
  const Tensor window =
      resized({{"height", 2}, {"width", 2}, {"crop_to_aspect_ratio", true}}, wide);
  EXPECT_EQ(std::vector<float>(window.data(), window.data() + 4), (std::vector<float>{1, 2, 5, 6}));
  // The 2x2 image to 2x4 with pad_to_aspect_ratio: centred in 2x4 (a column of fill_value each
  // side), which is already the target's size.
  const Tensor padded =
      resized({{"height", 2}, {"width", 4}, {"pad_to_aspect_ratio", true}, {"fill_value", 9}}, x);
  EXPECT_EQ(std::vector<float>(padded.data(), padded.data() + 8),
            (std::vector<float>{9, 0, 1, 9, 9, 2, 3, 9}));
  // 3 columns padded to 4 rows' ratio (4x4 from 4x3): one before is floor(1 / 2) = 0, so the
  // fill is after; bilinear to 2x2 reads each 2x2 block's centre: the last column's block
  // half fill.
  const Tensor narrow = Tensor::from_vector({1, 4, 3, 1}, {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2});
  const Tensor halved = resized(
      {{"height", 2}, {"width", 2}, {"pad_to_aspect_ratio", true}, {"fill_value", 4}}, narrow);
  EXPECT_EQ(std::vector<float>(halved.data(), halved.data() + 4),
            (std::vector<float>{0.5f, 3, 0.5f, 3}));
}

// A resize is linear in its input, so its gradient is its adjoint: <R x, dy> = <x, Rᵀ dy> for
// any x and dy, which a wrong weight or a tap sent to another pixel breaks.
TEST(Resizing, TheGradientIsTheResizesAdjoint) {
  for (const json& config : {json{{"height", 5}, {"width", 3}},
                             json{{"height", 7}, {"width", 9}, {"interpolation", "nearest"}},
                             json{{"height", 2}, {"width", 6}, {"crop_to_aspect_ratio", true}},
                             json{{"height", 2}, {"width", 6}, {"pad_to_aspect_ratio", true}}}) {
    auto layer = test::make_layer("Resizing", config);
    Rng init(2);
    layer->build({4, 4, 2}, init);
    const Tensor x = test::random_tensor({2, 4, 4, 2}, 3);
    const Tensor y = layer->forward(x, true).clone();
    const Tensor dy = test::random_tensor(y.shape(), 4);
    const Tensor dx = layer->backward(dy, true).clone();
    double forward_side = 0, backward_side = 0;
    for (std::int64_t i = 0; i < y.size(); ++i) forward_side += double{y[i]} * dy[i];
    for (std::int64_t i = 0; i < x.size(); ++i) backward_side += double{x[i]} * dx[i];
    EXPECT_NEAR(forward_side, backward_side, 1e-5 * std::fabs(forward_side)) << config.dump();
  }
}

TEST(Resizing, ConfigReadsBackAndBadKeysAreRefusedAtTheirPlace) {
  for (const json& config :
       {json{{"height", 6},
             {"width", 5},
             {"interpolation", "nearest"},
             {"crop_to_aspect_ratio", true}},
        json{{"height", 6}, {"width", 5}, {"pad_to_aspect_ratio", true}, {"fill_value", 0.5}}}) {
    const json written = test::make_layer("Resizing", config)->config();
    for (const auto& [key, value] : config.items()) EXPECT_EQ(written[key], value) << key;
    EXPECT_EQ(test::layer_config_error("Resizing", written), "(no error)");
  }
  const std::vector<std::pair<json, std::string>> bad{
      {{{"height", 6}, {"width", 5}, {"interpolation", "bicubic"}},
       "'layer.config.interpolation': Tandem resizes bilinear or nearest"},
      {{{"height", 6}, {"width", 5}, {"pad_to_aspect_ratio", true}, {"crop_to_aspect_ratio", true}},
       "'layer.config.pad_to_aspect_ratio': crop_to_aspect_ratio and pad_to_aspect_ratio cannot "
       "both be true"},
      {{{"height", 6}, {"width", 5}, {"pad_to_aspect_ratio", true}, {"fill_mode", "reflect"}},
       "'layer.config.fill_mode'"},
      {{{"height", 6}, {"width", 5}, {"pad_to_aspect_ratio", true}, {"fill_value", "black"}},
       "'layer.config.fill_value'"},
      {{{"height", 0}, {"width", 5}}, "'layer.config.height'"},
      {{{"width", 5}}, "'layer.config.height': required key is missing"},
      {{{"height", 6}, {"width", 5}, {"data_format", "channels_first"}},
       "'layer.config.data_format'"},
  };
  for (const auto& [c, message] : bad)
    EXPECT_NE(test::layer_config_error("Resizing", c).find(message), std::string::npos)
        << c.dump() << ": " << test::layer_config_error("Resizing", c);
  auto layer = test::make_layer("Resizing", {{"height", 2}, {"width", 2}});
  Rng init(1);
  EXPECT_THROW(layer->build({4, 4}, init), ShapeError);  // not images
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
