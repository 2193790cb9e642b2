// Dropout's noise_shape, SpatialDropout1D/2D/3D, AlphaDropout, GaussianNoise and GaussianDropout:
// the masks and
// noise they draw (shared where Keras shares them, the right distribution, independent of how a
// batch is split), their gradients, their configs and the configs they refuse.
#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.hpp"
#include "nn/dropout.hpp"
#include "nn/gaussian_noise.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

DropoutOptions spatial(int rank, double rate, std::uint64_t seed) {
  DropoutOptions o;
  o.rate = rate;
  o.seed = seed;
  o.spatial_rank = rank;
  return o;
}

Tensor ones(const Shape& shape) {
  Tensor t(shape);
  t.fill(1.0f);
  return t;
}

TEST(SpatialDropout2D, DropsWholeFeatureMapsAtTheRate) {
  Dropout d("sd", spatial(2, 0.4, 5));
  Rng init(0);
  EXPECT_EQ(d.build({4, 5, 64}, init), (Shape{4, 5, 64}));
  EXPECT_EQ(d.class_name(), "SpatialDropout2D");
  const Tensor y = d.forward(ones({50, 4, 5, 64}), true).clone();
  std::int64_t dropped = 0;
  for (std::int64_t b = 0; b < 50; ++b)
    for (std::int64_t c = 0; c < 64; ++c) {
      const float first = y[((b * 4) * 5) * 64 + c];
      EXPECT_TRUE(first == 0.0f || std::abs(first - 1.0f / 0.6f) < 1e-6) << first;
      dropped += first == 0.0f;
      for (std::int64_t cell = 0; cell < 20; ++cell)  // the same value over the whole map
        ASSERT_EQ(y[(b * 20 + cell) * 64 + c], first) << "sample " << b << " channel " << c;
    }
  // 3200 maps at rate 0.4: the standard deviation of the fraction is ~0.009.
  EXPECT_NEAR(static_cast<double>(dropped) / 3200.0, 0.4, 0.04);
  // The gradient takes the same mask.
  Tensor g = test::random_tensor(y.shape(), 3);
  const Tensor& gx = d.backward(g, true);
  for (std::int64_t i = 0; i < g.size(); ++i) EXPECT_FLOAT_EQ(gx[i], g[i] * y[i]);
  // The identity at inference.
  const Tensor x = test::random_tensor({2, 4, 5, 64}, 4);
  EXPECT_EQ(d.forward(x, false).data(), x.data());
}

TEST(SpatialDropout, NoiseShapeGivesTheSameMasksAsTheSpatialForm) {
  // Dropout with noise_shape (None, 1, C) is SpatialDropout1D: the same seed draws the same mask.
  DropoutOptions by_shape;
  by_shape.rate = 0.5;
  by_shape.seed = 9;
  by_shape.noise_shape = std::vector<std::optional<std::int64_t>>{1, std::nullopt};
  Dropout a("d", by_shape), b("d", spatial(1, 0.5, 9));
  Rng init(0);
  a.build({7, 16}, init);
  b.build({7, 16}, init);
  const Tensor x = test::random_tensor({6, 7, 16}, 5, 0.5f, 1.5f);
  const Tensor ya = a.forward(x, true).clone();
  const Tensor yb = b.forward(x, true).clone();
  for (std::int64_t i = 0; i < ya.size(); ++i) ASSERT_EQ(ya[i], yb[i]) << i;
  EXPECT_EQ(a.config()["noise_shape"], json::parse("[null, 1, null]"));
}

TEST(SpatialDropout, MasksDoNotDependOnHowTheBatchIsSplit) {
  Dropout whole("d", spatial(3, 0.3, 2)), first("d", spatial(3, 0.3, 2)),
      second("d", spatial(3, 0.3, 2));
  Rng init(0);
  for (Dropout* d : {&whole, &first, &second}) d->build({2, 3, 2, 8}, init);
  const Tensor x = test::random_tensor({9, 2, 3, 2, 8}, 6, 0.5f, 1.5f);
  const Tensor all = whole.forward(x, true).clone();
  const std::int64_t row = 2 * 3 * 2 * 8;
  Tensor top = Tensor::view(x, 0, {4, 2, 3, 2, 8}), bottom = Tensor::view(x, 4 * row, {5, 2, 3, 2, 8});
  second.set_sample_offset(4);
  const Tensor a = first.forward(top, true).clone();
  const Tensor b = second.forward(bottom, true).clone();
  for (std::int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], all[i]);
  for (std::int64_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], all[4 * row + i]);
}

TEST(SpatialDropout, RefusesInputsAndNoiseShapesThatDoNotFit) {
  Rng init(0);
  Dropout d("sd", spatial(2, 0.5, 1));
  EXPECT_THROW(d.build({4, 64}, init), ShapeError);
  DropoutOptions o;
  o.rate = 0.5;
  o.noise_shape = std::vector<std::optional<std::int64_t>>{1, 3};
  Dropout wrong_size("d", o);
  try {
    wrong_size.build({4, 5}, init);
    FAIL() << "a noise_shape entry that is neither 1 nor the input's size was accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("noise_shape[2] is 3"), std::string::npos) << e.what();
  }
  Dropout wrong_rank("d", o);
  EXPECT_THROW(wrong_rank.build({4, 5, 6}, init), ShapeError);
}

TEST(GaussianNoise, AddsNoiseOfTheStddevInTrainingOnly) {
  GaussianNoise n("noise", GaussianNoise::Kind::additive, 0.5, 3);
  Rng init(0);
  EXPECT_EQ(n.build({1000}, init), (Shape{1000}));
  const Tensor x = test::random_tensor({40, 1000}, 7);
  EXPECT_EQ(n.forward(x, false).data(), x.data());
  const Tensor y = n.forward(x, true).clone();
  // 40000 draws of 0.5·N(0, 1): mean within 4·0.5/200, stddev within 2%, and ~68.3% within one
  // standard deviation.
  double sum = 0, squares = 0;
  std::int64_t within = 0;
  for (std::int64_t i = 0; i < y.size(); ++i) {
    const double e = static_cast<double>(y[i]) - x[i];
    sum += e;
    squares += e * e;
    within += std::abs(e) < 0.5;
  }
  const double count = static_cast<double>(y.size());
  const double mean = sum / count, stddev = std::sqrt(squares / count - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(stddev, 0.5, 0.01);
  EXPECT_NEAR(static_cast<double>(within) / count, 0.6827, 0.01);
  // dy/dx = 1.
  const Tensor g = test::random_tensor(y.shape(), 8);
  const Tensor& gx = n.backward(g, true);
  for (std::int64_t i = 0; i < g.size(); ++i) ASSERT_EQ(gx[i], g[i]);
  // Another step draws other noise; the saved state draws it again.
  const auto state = n.random_state();
  const Tensor next = n.forward(x, true).clone();
  n.set_random_state(state);
  const Tensor again = n.forward(x, true).clone();
  int same_as_first = 0;
  for (std::int64_t i = 0; i < next.size(); ++i) {
    ASSERT_EQ(next[i], again[i]);
    same_as_first += next[i] == y[i];
  }
  EXPECT_LT(same_as_first, 100);
}

TEST(GaussianDropout, MultipliesByNoiseOfMeanOneAndTheRatesVariance) {
  const double rate = 0.2;  // variance rate / (1 - rate) = 0.25
  GaussianNoise n("gd", GaussianNoise::Kind::multiplicative, rate, 4);
  Rng init(0);
  n.build({500}, init);
  const Tensor x = test::random_tensor({80, 500}, 9, 0.5f, 2.0f);
  const Tensor y = n.forward(x, true).clone();
  double sum = 0, squares = 0;
  for (std::int64_t i = 0; i < y.size(); ++i) {
    const double m = static_cast<double>(y[i]) / x[i];
    sum += m;
    squares += m * m;
  }
  const double count = static_cast<double>(y.size());
  const double mean = sum / count;
  EXPECT_NEAR(mean, 1.0, 0.01);
  EXPECT_NEAR(squares / count - mean * mean, 0.25, 0.01);
  const Tensor g = test::random_tensor(y.shape(), 10);
  const Tensor& gx = n.backward(g, true);
  for (std::int64_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(gx[i], g[i] * y[i] / x[i], 1e-5f * (1.0f + std::abs(gx[i])));
}

// AlphaDropout by hand from Keras' definition: each value x·a + b where kept and α'·a + b where
// dropped, α' = -λα (SELU's saturation, -1.7580993...), a = ((1 - p)(1 + p·α'²))^-1/2,
// b = -a·α'·p; a fraction p dropped; on unit normal inputs (a SELU network's fixed point) the
// output keeps mean 0 and variance 1, which is what the layer is for; its gradient dy·a where
// kept, 0 where dropped; the identity at inference.
TEST(AlphaDropout, KeepsASeluNetworksMeanAndVariance) {
  const double p = 0.3;
  const double alpha_prime = -1.6732632423543772 * 1.0507009873554805;
  const double a = 1.0 / std::sqrt((1 - p) * (1 + p * alpha_prime * alpha_prime));
  const double b = -a * alpha_prime * p;
  DropoutOptions o;
  o.rate = p;
  o.seed = 8;
  o.alpha = true;
  Dropout d("ad", o);
  EXPECT_EQ(d.class_name(), "AlphaDropout");
  Rng init(0);
  d.build({500}, init);
  const Tensor x = test::random_normal_tensor({400, 500}, 12);
  const Tensor y = d.forward(x, true).clone();
  std::int64_t dropped = 0;
  double sum = 0, squares = 0;
  std::vector<char> kept(static_cast<std::size_t>(y.size()));
  for (std::int64_t i = 0; i < y.size(); ++i) {
    const double as_kept = a * x[i] + b, as_dropped = a * alpha_prime + b;
    kept[i] = std::abs(y[i] - as_kept) <= 1e-5 * (1 + std::abs(as_kept));
    ASSERT_TRUE(kept[i] || std::abs(y[i] - as_dropped) <= 1e-5) << i << ": " << y[i];
    dropped += !kept[i];
    sum += y[i];
    squares += static_cast<double>(y[i]) * y[i];
  }
  const double n = static_cast<double>(y.size()), mean = sum / n;
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.005);  // sd of the fraction ~0.001
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(squares / n - mean * mean, 1.0, 0.01);
  const Tensor g = test::random_tensor(y.shape(), 13);
  const Tensor& gx = d.backward(g, true);
  for (std::int64_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(gx[i], kept[i] ? a * g[i] : 0.0, 1e-5 * (1 + std::abs(g[i]))) << i;
  EXPECT_EQ(d.forward(x, false).data(), x.data());
}

TEST(GaussianNoise, NoiseDoesNotDependOnHowTheBatchIsSplit) {
  GaussianNoise whole("n", GaussianNoise::Kind::additive, 1.0, 6),
      first("n", GaussianNoise::Kind::additive, 1.0, 6),
      second("n", GaussianNoise::Kind::additive, 1.0, 6);
  Rng init(0);
  for (GaussianNoise* n : {&whole, &first, &second}) n->build({30}, init);
  const Tensor x = test::random_tensor({7, 30}, 11);
  const Tensor all = whole.forward(x, true).clone();
  second.set_sample_offset(2);
  const Tensor a = first.forward(Tensor::view(x, 0, {2, 30}), true).clone();
  const Tensor b = second.forward(Tensor::view(x, 60, {5, 30}), true).clone();
  for (std::int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], all[i]);
  for (std::int64_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], all[60 + i]);
}

json sequential_with(const json& layer) {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 4, 4, 3}}}}},
              layer}}}}};
}

std::string config_error(const json& layer) {
  try {
    Model::from_config(sequential_with(layer), "model", 0);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(NoiseLayerConfigs, KerasConfigsRoundTrip) {
  for (const char* text : {
           R"({"class_name": "SpatialDropout2D", "config": {"name": "sd", "trainable": true,
               "dtype": "float32", "rate": 0.25, "seed": 3, "data_format": "channels_last"}})",
           R"({"class_name": "GaussianNoise", "config": {"name": "gn", "trainable": true,
               "dtype": "float32", "stddev": 0.1, "seed": null}})",
           R"({"class_name": "GaussianDropout", "config": {"name": "gd", "trainable": true,
               "dtype": "float32", "rate": 0.3, "seed": null}})",
           R"({"class_name": "AlphaDropout", "config": {"name": "ad", "trainable": true,
               "dtype": "float32", "rate": 0.1, "noise_shape": [null, 4, 1, 3], "seed": 7}})",
           R"({"class_name": "Dropout", "config": {"name": "d", "trainable": true,
               "dtype": "float32", "rate": 0.5, "noise_shape": [null, 1, 1, 3], "seed": null}})"}) {
    const json layer = json::parse(text);
    auto model = Model::from_config(sequential_with(layer), "model", 0);
    const json written = model->config()["config"]["layers"][1];
    EXPECT_EQ(written["class_name"], layer["class_name"]);
    for (const auto& [key, value] : layer["config"].items())
      EXPECT_EQ(written["config"][key], value) << layer["class_name"] << "." << key;
  }
}

void expect_refused(const char* cls, const json& cfg, const std::string& wanted) {
  const std::string message = config_error({{"class_name", cls}, {"config", cfg}});
  EXPECT_NE(message.find(wanted), std::string::npos)
      << cls << " " << cfg.dump() << ": wanted \"" << wanted << "\" in: " << message;
}

TEST(NoiseLayerConfigs, BadConfigsAreRefusedAtTheirPath) {
  expect_refused("Dropout", {{"rate", 0.5}, {"noise_shape", {1, 1, 1, 3}}}, "noise_shape[0]");
  expect_refused("Dropout", {{"rate", 0.5}, {"noise_shape", {nullptr, 0, 1, 3}}},
                 "noise_shape[1]': expected null or a positive integer");
  expect_refused("Dropout", {{"rate", 0.5}, {"noise_shape", "channels"}},
                 "noise_shape': expected a list");
  expect_refused("SpatialDropout2D", {{"rate", 0.5}, {"data_format", "channels_first"}},
                 "data_format");
  expect_refused("GaussianNoise", {{"seed", 1}}, "stddev': required key is missing");
  expect_refused("GaussianNoise", {{"stddev", -0.1}}, "stddev");
  expect_refused("GaussianDropout", {{"rate", 1.0}}, "rate");
  expect_refused("AlphaDropout", {{"rate", 1.0}}, "rate");
  expect_refused("AlphaDropout", {{"seed", 2}}, "rate': required key is missing");
  expect_refused("AlphaDropout", {{"rate", 0.1}, {"noise_shape", {nullptr, 4, 2, 3}}},
                 "noise_shape[2]");
  expect_refused("GaussianNoise", {{"stddev", 0.1}, {"sigma", 1}}, "sigma");
}

}  // namespace
}  // namespace tandem::nn
