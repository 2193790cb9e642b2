#include "nn/initializer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "tandem/error.hpp"

namespace tandem::nn {
namespace {

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
  parse_initializer(spec, "init").fill(t, fan_in, fan_out, rng);
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
  parse_initializer(seeded, "init").fill(s1, 4, 4, r1);
  parse_initializer(seeded, "init").fill(s2, 4, 4, r2);
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
  parse_initializer(shifted, "i").fill(u, 100, 100, rng);
  Moments mu = moments_of(u);
  EXPECT_NEAR(mu.mean, 2.0, 0.02);
  EXPECT_LE(mu.max_abs, 3.0);
  for (float v : u.values()) EXPECT_GE(v, 1.0f);
  const nlohmann::json normal = {{"class_name", "RandomNormal"},
                                 {"config", {{"mean", -1.0}, {"stddev", 0.5}}}};
  Tensor n({100, 100});
  parse_initializer(normal, "i").fill(n, 100, 100, rng);
  Moments mn = moments_of(n);
  EXPECT_NEAR(mn.mean, -1.0, 0.02);
  EXPECT_NEAR(mn.stddev, 0.5, 0.02);
  EXPECT_EQ(parse_initializer(normal, "i").config()["config"]["stddev"], 0.5);
  EXPECT_THROW(parse_initializer(nlohmann::json{{"class_name", "RandomUniform"},
                                                {"config", {{"minval", 1}, {"maxval", 0}}}},
                                 "i"),
               ConfigError);
}

}  // namespace
}  // namespace tandem::nn
