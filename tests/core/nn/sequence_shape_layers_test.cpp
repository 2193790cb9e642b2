// The layers that move steps and axes: ZeroPadding1D, Cropping1D, UpSampling1D, RepeatVector,
// Permute; and GroupNormalization, which normalises across them. Values by hand on small inputs,
// configs read back, and what Keras would not take (or computes otherwise) refused at its key.
// (LayerOracle.SequenceShapeLayersMatchPyTorch checks outputs and gradients against torch.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nn/layer_registry.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::unique_ptr<Layer> make(const std::string& cls, const json& config) {
  return test::make_layer(cls, config);
}

std::string config_error(const std::string& cls, const json& config) {
  return test::layer_config_error(cls, config);
}

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data(), t.data() + t.size());
}

// One sample of 3 steps of 2 channels: (1, 2), (3, 4), (5, 6).
Tensor steps() {
  return Tensor::from_vector({1, 3, 2}, {1, 2, 3, 4, 5, 6});
}

TEST(SequenceShapeLayers, StepsArePaddedCutRepeatedAndPermutedByHand) {
  Rng init(1);
  auto pad = make("ZeroPadding1D", {{"padding", {1, 2}}});
  EXPECT_EQ(pad->build({3, 2}, init), (Shape{6, 2}));
  EXPECT_EQ(values(pad->forward(steps(), false)),
            (std::vector<float>{0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0}));
  auto crop = make("Cropping1D", {{"cropping", 1}});
  EXPECT_EQ(crop->build({3, 2}, init), (Shape{1, 2}));
  EXPECT_EQ(values(crop->forward(steps(), false)), (std::vector<float>{3, 4}));
  auto up = make("UpSampling1D", {{"size", 2}});
  EXPECT_EQ(up->build({3, 2}, init), (Shape{6, 2}));
  EXPECT_EQ(values(up->forward(steps(), false)),
            (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4, 5, 6, 5, 6}));
  // Its gradient: each step's repeats summed.
  EXPECT_EQ(values(up->backward(
                Tensor::from_vector({1, 6, 2}, {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}), true)),
            (std::vector<float>{3, 3, 7, 7, 11, 11}));
  auto repeat = make("RepeatVector", {{"n", 3}});
  EXPECT_EQ(repeat->build({2}, init), (Shape{3, 2}));
  EXPECT_EQ(values(repeat->forward(Tensor::from_vector({1, 2}, {7, 8}), false)),
            (std::vector<float>{7, 8, 7, 8, 7, 8}));
  EXPECT_EQ(values(repeat->backward(Tensor::from_vector({1, 3, 2}, {1, 2, 3, 4, 5, 6}), true)),
            (std::vector<float>{9, 12}));
  auto permute = make("Permute", {{"dims", {2, 1}}});
  EXPECT_EQ(permute->build({3, 2}, init), (Shape{2, 3}));
  EXPECT_EQ(values(permute->forward(steps(), false)), (std::vector<float>{1, 3, 5, 2, 4, 6}));
  EXPECT_EQ(values(permute->backward(Tensor::from_vector({1, 2, 3}, {1, 3, 5, 2, 4, 6}), true)),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // (2, 3, 4) with dims (3, 1, 2): element [a, b, c] moves to [c, a, b].
  auto three = make("Permute", {{"dims", {3, 1, 2}}});
  EXPECT_EQ(three->build({2, 3, 4}, init), (Shape{4, 2, 3}));
  Tensor x({1, 2, 3, 4});
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const Tensor& y = three->forward(x, false);
  for (std::int64_t a = 0; a < 2; ++a)
    for (std::int64_t b = 0; b < 3; ++b)
      for (std::int64_t c = 0; c < 4; ++c)
        ASSERT_EQ(y[(c * 2 + a) * 3 + b], x[(a * 3 + b) * 4 + c]) << a << b << c;
}

TEST(SequenceShapeLayers, ConfigsReadBackAndBadOnesAreRefusedAtTheirPlace) {
  for (const auto& [cls, config] :
       std::vector<std::pair<std::string, json>>{{"ZeroPadding1D", {{"padding", {1, 2}}}},
                                                 {"Cropping1D", {{"cropping", {0, 3}}}},
                                                 {"UpSampling1D", {{"size", 4}}},
                                                 {"RepeatVector", {{"n", 5}}},
                                                 {"Permute", {{"dims", {3, 1, 2}}}}}) {
    const json written = make(cls, config)->config();
    EXPECT_EQ(make(cls, written)->config(), written) << cls;
  }
  EXPECT_EQ(make("ZeroPadding1D", json::object())->config()["padding"], json({1, 1}));
  const std::vector<std::tuple<std::string, json, std::string>> bad{
      {"ZeroPadding1D", {{"padding", -1}}, "'layer.config.padding'"},
      {"ZeroPadding1D",
       {{"padding", {1, 2, 3}}},
       "'layer.config.padding': expected n or [left, right]"},
      {"Cropping1D", {{"cropping", {1, "a"}}}, "'layer.config.cropping[1]'"},
      {"UpSampling1D", {{"size", 0}}, "'layer.config.size'"},
      {"RepeatVector", json::object(), "'layer.config.n'"},
      {"RepeatVector", {{"n", 0}}, "'layer.config.n'"},
      {"Permute",
       {{"dims", {1, 1}}},
       "'layer.config.dims[1]': expected each axis from 1 to 2 once"},
      {"Permute", {{"dims", {0, 1}}}, "'layer.config.dims[0]'"},
      {"Permute", {{"dims", json::array()}}, "'layer.config.dims'"},
      {"ZeroPadding1D", {{"data_format", "channels_first"}}, "'layer.config.data_format'"},
  };
  for (const auto& [cls, config, message] : bad)
    EXPECT_NE(config_error(cls, config).find(message), std::string::npos)
        << cls << " " << config.dump() << ": " << config_error(cls, config);
  Rng init(1);
  EXPECT_THROW(make("RepeatVector", {{"n", 2}})->build({3, 2}, init), ShapeError);
  EXPECT_THROW(make("Permute", {{"dims", {2, 1}}})->build({3, 2, 1}, init), ShapeError);
  EXPECT_THROW(make("UpSampling1D", {{"size", 2}})->build({3}, init), ShapeError);
  EXPECT_THROW(make("Cropping1D", {{"cropping", {2, 2}}})->build({3, 1}, init), ShapeError);
}

// GroupNormalization: a group's values normalised together, by hand; configs read back; groups
// that do not divide the channels refused.
TEST(GroupNormalization, GroupsNormaliseTheirChannelsTogetherAndBadConfigsAreRefused) {
  auto layer = make("GroupNormalization", {{"groups", 2}, {"epsilon", 0.0001}});
  Rng init(1);
  EXPECT_EQ(layer->build({2, 4}, init), (Shape{2, 4}));
  // Two positions of 4 channels: group 0 holds channels 0-1, group 1 channels 2-3.
  const Tensor x = Tensor::from_vector({1, 2, 4}, {1, 3, 10, 10, 5, 7, 10, 30});
  const Tensor& y = layer->forward(x, false);
  // Group 0: 1, 3, 5, 7 (mean 4, variance 5); group 1: 10, 10, 10, 30 (mean 15, variance 75).
  const double s0 = std::sqrt(5.0 + 1e-4), s1 = std::sqrt(75.0 + 1e-4);
  const std::vector<double> want{-3 / s0, -1 / s0, -5 / s1, -5 / s1,
                                 1 / s0,  3 / s0,  -5 / s1, 15 / s1};
  for (std::int64_t i = 0; i < 8; ++i)
    EXPECT_NEAR(y[i], want[static_cast<std::size_t>(i)], 1e-5) << i;
  const json written = layer->config();
  EXPECT_EQ(written["groups"], 2);
  EXPECT_EQ(make("GroupNormalization", written)->config(), written);
  EXPECT_THROW(make("GroupNormalization", {{"groups", 3}})->build({2, 4}, init), ShapeError);
  EXPECT_THROW(make("GroupNormalization", json::object())->build({2, 4}, init), ShapeError);
  EXPECT_THROW(make("GroupNormalization", {{"groups", 2}, {"axis", 1}})->build({2, 4}, init),
               ShapeError);  // not the last axis of (None, 2, 4)
  EXPECT_NO_THROW(make("GroupNormalization", {{"groups", 2}, {"axis", 2}})->build({2, 4}, init));
  for (const auto& [config, message] : std::vector<std::pair<json, std::string>>{
           {{{"groups", 0}}, "'layer.config.groups'"},
           {{{"axis", 0}}, "'layer.config.axis'"},
           {{{"epsilon", -1}}, "'layer.config.epsilon'"},
           {{{"gamma_regularizer", "l2"}}, "'layer.config.gamma_regularizer'"}})
    EXPECT_NE(config_error("GroupNormalization", config).find(message), std::string::npos)
        << config.dump() << ": " << config_error("GroupNormalization", config);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
