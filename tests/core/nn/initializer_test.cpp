#include "nn/initializer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "tandem/error.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

struct Moments {
  double mean = 0, stddev = 0, max_abs = 0;
};

Moments moments_of(const Tensor& t) {
  Moments m;
  for (float v : t.values()) m.mean += v;
  m.mean /= static_cast<double>(t.size());
  for (float v : t.values()) {
    m.stddev += (v - m.mean) * (v - m.mean);
    m.max_abs = std::max(m.max_abs, static_cast<double>(std::fabs(v)));
  }
  m.stddev = std::sqrt(m.stddev / static_cast<double>(t.size()));
  return m;
}

Tensor draw(const std::string& spec, std::int64_t fan_in, std::int64_t fan_out,
            std::uint64_t seed = 1) {
  Tensor t({fan_in, fan_out});
  Rng rng(seed);
  parse_initializer(spec, "init").fill(t, rng);
  return t;
}

TEST(Initializer, GlorotUniformHasKerasLimitAndVariance) {
  // limit = sqrt(6 / (fan_in + fan_out)); a uniform variable has stddev limit / sqrt(3).
  Tensor t = draw("glorot_uniform", 400, 200);
  const double limit = std::sqrt(6.0 / 600.0);
  Moments m = moments_of(t);
  EXPECT_LE(m.max_abs, limit);
  EXPECT_GT(m.max_abs, 0.99 * limit);
  EXPECT_NEAR(m.mean, 0.0, 0.002);
  EXPECT_NEAR(m.stddev, limit / std::sqrt(3.0), 0.01 * limit);
}

TEST(Initializer, HeNormalIsATruncatedNormalWithKerasVariance) {
  // Keras: truncated normal (at 2 sigma of the underlying normal) whose stddev is sqrt(2 / fan_in).
  Tensor t = draw("he_normal", 500, 400);
  const double target = std::sqrt(2.0 / 500.0);
  Moments m = moments_of(t);
  EXPECT_NEAR(m.stddev, target, 0.01 * target);
  EXPECT_LE(m.max_abs, 2.0 * target / .87962566103423978 + 1e-6);
  EXPECT_NEAR(m.mean, 0.0, 0.002);
}

TEST(Initializer, ConstantsAndSeeds) {
  const Tensor zeros = draw("zeros", 3, 4), ones = draw("ones", 3, 4);
  for (float v : zeros.values()) EXPECT_EQ(v, 0.0f);
  for (float v : ones.values()) EXPECT_EQ(v, 1.0f);
  // The same model stream gives the same values; another gives others.
  Tensor a = draw("he_normal", 10, 10, 7), b = draw("he_normal", 10, 10, 7),
         c = draw("he_normal", 10, 10, 8);
  EXPECT_EQ(a[3], b[3]);
  EXPECT_NE(a[3], c[3]);
  // An initializer's own seed wins over the model stream, as in Keras.
  nlohmann::json seeded = {{"class_name", "GlorotUniform"}, {"config", {{"seed", 42}}}};
  Tensor s1({4, 4}), s2({4, 4});
  Rng r1(1), r2(2);
  parse_initializer(seeded, "init").fill(s1, r1);
  parse_initializer(seeded, "init").fill(s2, r2);
  for (std::int64_t i = 0; i < s1.size(); ++i) EXPECT_EQ(s1[i], s2[i]);
  EXPECT_EQ(parse_initializer(seeded, "init").config()["config"]["seed"], 42);
}

TEST(Initializer, UnknownNameOrBadSpecNamesThePath) {
  try {
    parse_initializer("xavier", "model.config.layers[0].config.kernel_initializer");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'model.config.layers[0].config.kernel_initializer'"),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("glorot_uniform"), std::string::npos);
  }
  EXPECT_THROW(
      parse_initializer(nlohmann::json{{"class_name", "HeNormal"}, {"config", {{"sed", 1}}}}, "i"),
      ConfigError);
  EXPECT_THROW(parse_initializer(3, "i"), ConfigError);
}

TEST(Initializer, KerasAliasesAndRandomDistributionArguments) {
  // keras.initializers.get("uniform") is RandomUniform(-0.05, 0.05) (Embedding's default).
  EXPECT_EQ(parse_initializer("uniform", "i").name, "random_uniform");
  EXPECT_EQ(parse_initializer("normal", "i").name, "random_normal");
  EXPECT_EQ(parse_initializer("one", "i").name, "ones");
  EXPECT_EQ(parse_initializer("zero", "i").name, "zeros");
  const nlohmann::json uniform = parse_initializer("uniform", "i").config();
  EXPECT_EQ(uniform["class_name"], "RandomUniform");
  EXPECT_EQ(uniform["config"]["minval"], -0.05);
  EXPECT_EQ(uniform["config"]["maxval"], 0.05);
  // Keras' own serialisation, with its arguments.
  const nlohmann::json shifted = {
      {"class_name", "RandomUniform"},
      {"config", {{"minval", 1.0}, {"maxval", 3.0}, {"seed", nullptr}}}};
  Tensor u({100, 100});
  Rng rng(1);
  parse_initializer(shifted, "i").fill(u, rng);
  Moments mu = moments_of(u);
  EXPECT_NEAR(mu.mean, 2.0, 0.02);
  EXPECT_LE(mu.max_abs, 3.0);
  for (float v : u.values()) EXPECT_GE(v, 1.0f);
  const nlohmann::json normal = {{"class_name", "RandomNormal"},
                                 {"config", {{"mean", -1.0}, {"stddev", 0.5}}}};
  Tensor n({100, 100});
  parse_initializer(normal, "i").fill(n, rng);
  Moments mn = moments_of(n);
  EXPECT_NEAR(mn.mean, -1.0, 0.02);
  EXPECT_NEAR(mn.stddev, 0.5, 0.02);
  EXPECT_EQ(parse_initializer(normal, "i").config()["config"]["stddev"], 0.5);
  EXPECT_THROW(parse_initializer(nlohmann::json{{"class_name", "RandomUniform"},
                                                {"config", {{"minval", 1}, {"maxval", 0}}}},
                                 "i"),
               ConfigError);
}

Tensor draw_json(const nlohmann::json& spec, const Shape& shape, std::uint64_t seed = 3) {
  Tensor t(shape);
  Rng rng(seed);
  parse_initializer(spec, "init").fill(t, rng);
  return t;
}

TEST(Initializer, VarianceScalingHasScaleOverFanInEveryModeAndDistribution) {
  // Keras: variance = scale / fan, fan = fan_in, fan_out or their mean; the truncated normal
  // is rescaled to keep that variance, the uniform's limit is sqrt(3 variance).
  for (const char* mode : {"fan_in", "fan_out", "fan_avg"})
    for (const char* distribution : {"truncated_normal", "untruncated_normal", "uniform"}) {
      const nlohmann::json spec = {
          {"class_name", "VarianceScaling"},
          {"config", {{"scale", 3.0}, {"mode", mode}, {"distribution", distribution},
                      {"seed", nullptr}}}};
      const Tensor t = draw_json(spec, {300, 200});
      const double fan = std::string(mode) == "fan_in"    ? 300.0
                         : std::string(mode) == "fan_out" ? 200.0
                                                          : 250.0;
      const double stddev = std::sqrt(3.0 / fan);
      const Moments m = moments_of(t);
      EXPECT_NEAR(m.stddev, stddev, 0.015 * stddev) << mode << " " << distribution;
      EXPECT_NEAR(m.mean, 0.0, 0.01 * stddev) << mode << " " << distribution;
      const std::string d = distribution;
      if (d == "uniform") {
        EXPECT_LE(m.max_abs, std::sqrt(3.0) * stddev + 1e-7);
      } else if (d == "truncated_normal") {
        EXPECT_LE(m.max_abs, 2.0 * stddev / .87962566103423978 + 1e-6);
      } else {
        EXPECT_GT(m.max_abs, 3.0 * stddev);  // tails a truncated normal never has
      }
      EXPECT_EQ(parse_initializer(spec, "i").config(), spec) << "round trip";
    }
  // glorot_uniform is VarianceScaling(1, fan_avg, uniform) to the bit.
  const Tensor named = draw("glorot_uniform", 40, 30, 9);
  const Tensor spelled =
      draw_json({{"class_name", "VarianceScaling"},
                 {"config", {{"scale", 1.0}, {"mode", "fan_avg"}, {"distribution", "uniform"}}}},
                {40, 30}, 9);
  for (std::int64_t i = 0; i < named.size(); ++i) ASSERT_EQ(named[i], spelled[i]) << i;
}

TEST(Initializer, TruncatedNormalStaysWithinTwoStandardDeviations) {
  const nlohmann::json spec = {{"class_name", "TruncatedNormal"},
                               {"config", {{"mean", 0.5}, {"stddev", 0.02}, {"seed", 4}}}};
  const Tensor t = draw_json(spec, {200, 100});
  const Moments m = moments_of(t);
  EXPECT_NEAR(m.mean, 0.5, 0.001);
  // A standard normal cut at +-2 has standard deviation 0.8796.
  EXPECT_NEAR(m.stddev, 0.02 * .87962566103423978, 0.0003);
  for (float v : t.values()) {
    ASSERT_LE(v, 0.54f + 1e-6f);
    ASSERT_GE(v, 0.46f - 1e-6f);
  }
  EXPECT_EQ(parse_initializer(spec, "i").config()["config"]["stddev"], 0.02);
}

TEST(Initializer, FansAreKerasComputeFansOfTheWeightsOwnShape) {
  // keras/src/initializers/random_initializers.py compute_fans, by hand.
  EXPECT_EQ(keras_fans({}), std::make_pair(std::int64_t{1}, std::int64_t{1}));
  EXPECT_EQ(keras_fans({7}), std::make_pair(std::int64_t{7}, std::int64_t{7}));
  EXPECT_EQ(keras_fans({5, 3}), std::make_pair(std::int64_t{5}, std::int64_t{3}));
  EXPECT_EQ(keras_fans({3, 3, 4, 8}), std::make_pair(std::int64_t{36}, std::int64_t{72}));
  EXPECT_EQ(keras_fans({4, 4, 8}), std::make_pair(std::int64_t{16}, std::int64_t{32}));
  // A bias of 2,000 units drawn by he_uniform: limit sqrt(6 / 2000) from its own shape, not from
  // the kernel's fan-in (a Dense layer on 10 features drew it within sqrt(6 / 10), 14x too wide).
  const Tensor bias = draw_json("he_uniform", {2000});
  const double limit = std::sqrt(6.0 / 2000.0);
  const Moments m = moments_of(bias);
  EXPECT_LE(m.max_abs, limit);
  EXPECT_GT(m.max_abs, 0.95 * limit);
  EXPECT_NEAR(m.stddev, limit / std::sqrt(3.0), 0.05 * limit);
}

// max |W^T W - gain^2 I| (tall) or |W W^T - gain^2 I| (wide) over a rows x cols weight.
double orthogonality_error(const Tensor& w, std::int64_t rows, std::int64_t cols, double gain) {
  const bool tall = rows >= cols;
  const std::int64_t n = tall ? cols : rows, len = tall ? rows : cols;
  double worst = 0;
  for (std::int64_t a = 0; a < n; ++a)
    for (std::int64_t b = 0; b < n; ++b) {
      double dot = 0;
      for (std::int64_t k = 0; k < len; ++k)
        dot += tall ? static_cast<double>(w[k * cols + a]) * w[k * cols + b]
                    : static_cast<double>(w[a * cols + k]) * w[b * cols + k];
      worst = std::max(worst, std::fabs(dot - (a == b ? gain * gain : 0.0)));
    }
  return worst;
}

TEST(Initializer, OrthogonalGivesOrthonormalRowsOrColumnsTimesGain) {
  const nlohmann::json spec = {{"class_name", "Orthogonal"},
                               {"config", {{"gain", 1.5}, {"seed", nullptr}}}};
  const Tensor tall = draw_json(spec, {40, 12});
  EXPECT_LT(orthogonality_error(tall, 40, 12, 1.5), 1e-5);
  const Tensor wide = draw_json(spec, {7, 30});
  EXPECT_LT(orthogonality_error(wide, 7, 30, 1.5), 1e-5);
  // A convolution kernel (3, 3, 4, 8) is flattened to (36, 8) as Keras does.
  const Tensor kernel = draw_json(spec, {3, 3, 4, 8});
  EXPECT_LT(orthogonality_error(kernel, 36, 8, 1.5), 1e-5);
  // A negative control: a random normal matrix is far from orthogonal.
  const Tensor random = draw_json("random_normal", {40, 12});
  EXPECT_GT(orthogonality_error(random, 40, 12, 1.5), 0.5);
  EXPECT_EQ(parse_initializer(spec, "i").config(), spec);
}

TEST(Initializer, IdentityIsGainOnTheDiagonalOfA2dWeight) {
  const nlohmann::json spec = {{"class_name", "Identity"}, {"config", {{"gain", 2.0}}}};
  const Tensor t = draw_json(spec, {3, 4});
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t c = 0; c < 4; ++c) EXPECT_EQ(t[r * 4 + c], r == c ? 2.0f : 0.0f);
  EXPECT_THROW(draw_json(spec, {3, 3, 2, 2}), ShapeError);
  EXPECT_EQ(parse_initializer(spec, "i").config(), spec);
}

TEST(Initializer, BadVarianceScalingAndOrthogonalArgumentsNameTheirPath) {
  const auto error_of = [](const nlohmann::json& config) {
    try {
      parse_initializer({{"class_name", "VarianceScaling"}, {"config", config}}, "init");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of({{"scale", 0}}).find("'init.config.scale': expected a positive number"),
            std::string::npos);
  EXPECT_NE(error_of({{"mode", "fan_max"}}).find("'init.config.mode'"), std::string::npos);
  EXPECT_NE(error_of({{"distribution", "cauchy"}}).find("'init.config.distribution'"),
            std::string::npos);
  EXPECT_NE(error_of({{"gain", 2}}).find("'init.config.gain'"), std::string::npos);
  // Keras' "normal" distribution is the truncated normal, and Keras lowercases the name.
  for (const auto& [given, read] : std::vector<std::pair<const char*, const char*>>{
           {"normal", "truncated_normal"},
           {"Normal", "truncated_normal"},
           {"UNIFORM", "uniform"},
           {"Untruncated_Normal", "untruncated_normal"}})
    EXPECT_EQ(parse_initializer(
                  {{"class_name", "VarianceScaling"}, {"config", {{"distribution", given}}}}, "i")
                  .distribution,
              read)
        << given;
  EXPECT_NE(error_of({{"distribution", "Cauchy"}})
                .find("'init.config.distribution': expected one of 'truncated_normal', "
                      "'untruncated_normal', 'uniform', 'normal' (in any case), got 'Cauchy'"),
            std::string::npos)
      << error_of({{"distribution", "Cauchy"}});
  try {
    parse_initializer({{"class_name", "Xavier"}}, "init");
    ADD_FAILURE() << "Xavier accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'init.class_name': unknown initializer 'Xavier'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::nn
