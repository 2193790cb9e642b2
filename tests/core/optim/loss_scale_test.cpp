// Keras' LossScaleOptimizer: the dynamic scale's rules step by step (Keras 3's
// LossScaleOptimizer, hand-traced), its state, and the two config forms Keras writes.
#include "optim/loss_scale.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/ops.hpp"
#include "optim/optimizer.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

TEST(LossScale, HalvesOnOverflowAndDoublesAfterGrowthStepsGoodStepsInARow) {
  LossScale s({/*initial_scale=*/4.0, /*growth_steps=*/3, /*dynamic=*/true});
  EXPECT_TRUE(s.record(true));
  EXPECT_TRUE(s.record(true));
  EXPECT_EQ(s.scale(), 4.0);
  EXPECT_EQ(s.good_steps(), 2);
  EXPECT_TRUE(s.record(true));  // the third good step in a row
  EXPECT_EQ(s.scale(), 8.0);
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_TRUE(s.record(true));
  EXPECT_FALSE(s.record(false));  // skipped: halved, the run of good steps starts again
  EXPECT_EQ(s.scale(), 4.0);
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_FALSE(s.record(false));
  EXPECT_EQ(s.scale(), 2.0);
  EXPECT_EQ(s.skipped_steps(), 2);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(s.record(true));
  EXPECT_EQ(s.scale(), 4.0);
  EXPECT_EQ(s.skipped_steps(), 2);  // a count over the run
}

TEST(LossScale, AFixedScaleNeverMovesAndAppliesEveryStep) {
  LossScale s({1024.0, 2, /*dynamic=*/false});
  for (bool finite : {true, false, true, true, false}) EXPECT_TRUE(s.record(finite));
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.skipped_steps(), 0);
}

// 2^126: the largest scale whose inverse, which the gradients are multiplied by, is a normal float.
TEST(LossScale, NeverGrowsBeyondTwoToThe126) {
  LossScale s({std::ldexp(1.0, 125), 1, true});
  EXPECT_TRUE(s.record(true));
  EXPECT_EQ(s.scale(), std::ldexp(1.0, 126));
  EXPECT_TRUE(s.record(true));
  EXPECT_EQ(s.scale(), std::ldexp(1.0, 126));
}

TEST(LossScale, GradientsThatAreNotFiniteAtAnyScaleStopTheRun) {
  LossScale s({std::ldexp(1.0, -125), 2000, true});
  EXPECT_FALSE(s.record(false));  // 2^-126, the smallest normal float
  EXPECT_EQ(s.scale(), static_cast<double>(std::numeric_limits<float>::min()));
  try {
    s.record(false);
    ADD_FAILURE() << "no error";
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("2 steps in a row had non-finite gradients"),
              std::string::npos)
        << e.what();
  }
}

TEST(LossScale, StateRoundTripsAndMalformedStateIsADataErrorNamingTheSource) {
  LossScale a({2.0, 5, true});
  a.record(true);
  a.record(false);
  a.record(true);
  LossScale b({2.0, 5, true});
  b.restore(a.state(), "ckpt.h5");
  EXPECT_EQ(b.state(), a.state());
  EXPECT_EQ(b.scale(), 1.0);
  EXPECT_EQ(b.good_steps(), 1);
  EXPECT_EQ(b.skipped_steps(), 1);

  const json good = a.state();
  const auto refused = [&](json state, const std::string& words) {
    try {
      b.restore(state, "ckpt.h5");
      ADD_FAILURE() << "accepted " << state.dump();
    } catch (const DataError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("ckpt.h5: the training state's loss_scale"), std::string::npos) << what;
      EXPECT_NE(what.find(words), std::string::npos) << what;
    }
  };
  refused(json(), "not an object");
  refused(json::array(), "not an object");
  for (const char* key : {"scale", "good_steps", "skipped_steps"}) {
    json missing = good;
    missing.erase(key);
    refused(missing, std::string("no number '") + key + "'");
    json text = good;
    text[key] = "1";
    refused(text, std::string("no number '") + key + "'");
  }
  for (double scale : {0.0, -2.0, 1e-40, 1e39, std::ldexp(1.0, 127)}) {
    json bad = good;
    bad["scale"] = scale;
    refused(bad, "not a positive normal float of at most 2^126");
  }
  json nan = good;
  nan["scale"] = std::nan("");
  refused(nan, "not a positive normal float");
  for (const json& count : {json(-1), json(1.5)}) {
    json bad = good;
    bad["good_steps"] = count;
    refused(bad, "not a count");
  }
  json full = good;
  full["good_steps"] = 5;  // the growth step would have doubled the scale and reset it
  refused(full, "not below dynamic_growth_steps 5");
  EXPECT_EQ(b.state(), a.state());  // a refused state changes nothing
}

json adam(double lr) {
  return {{"module", "keras.optimizers"},
          {"class_name", "Adam"},
          {"config", {{"name", "adam"}, {"learning_rate", lr}}},
          {"registered_name", nullptr}};
}

TEST(LossScaleOptimizer, KerasThreeFormWrapsTheInnerOptimizer) {
  const json spec = {{"module", "keras.optimizers"},
                     {"class_name", "LossScaleOptimizer"},
                     {"config",
                      {{"name", "loss_scale_optimizer"},
                       {"inner_optimizer", adam(0.002)},
                       {"initial_scale", 256.0},
                       {"dynamic_growth_steps", 10}}},
                     {"registered_name", nullptr}};
  auto opt = make_optimizer(spec, "optimizer");
  EXPECT_EQ(opt->class_name(), "Adam");
  EXPECT_DOUBLE_EQ(opt->learning_rate(), 0.002);
  ASSERT_NE(opt->loss_scale(), nullptr);
  EXPECT_EQ(opt->loss_scale()->scale(), 256.0);
  EXPECT_EQ(opt->loss_scale()->config().growth_steps, 10);
  EXPECT_TRUE(opt->loss_scale()->config().dynamic);
  EXPECT_EQ(opt->loss_scale_factor(), 256.0f);
  EXPECT_EQ(opt->keras_class_name(), "LossScaleOptimizer");
  // What it writes reads back to the same optimizer.
  auto again = make_optimizer(
      json{{"class_name", opt->keras_class_name()}, {"config", opt->keras_config()}}, "o");
  EXPECT_EQ(again->keras_config(), opt->keras_config());
  EXPECT_EQ(opt->keras_config().at("inner_optimizer").at("config"), opt->config());
}

TEST(LossScaleOptimizer, KerasTwoFormWithAFixedScaleAndTheDefaults) {
  auto fixed = make_optimizer(
      json::parse(R"({"class_name": "LossScaleOptimizer", "config": {"inner_optimizer":
          {"class_name": "SGD", "config": {"learning_rate": 0.1}}, "dynamic": false,
          "initial_scale": 128.0, "dynamic_growth_steps": 2000}})"),
      "optimizer");
  EXPECT_FALSE(fixed->loss_scale()->config().dynamic);
  EXPECT_EQ(fixed->keras_config().at("dynamic"), false);
  auto defaults = make_optimizer(
      json::parse(R"({"class_name": "LossScaleOptimizer", "config": {"inner_optimizer": "sgd"}})"),
      "optimizer");
  EXPECT_EQ(defaults->loss_scale()->scale(), 32768.0);  // Keras' 2^15
  EXPECT_EQ(defaults->loss_scale()->config().growth_steps, 2000);
  EXPECT_EQ(defaults->class_name(), "SGD");
  auto plain = make_optimizer(json("adam"), "optimizer");
  EXPECT_EQ(plain->loss_scale(), nullptr);
  EXPECT_EQ(plain->loss_scale_factor(), 1.0f);
  EXPECT_EQ(plain->keras_class_name(), "Adam");
}

// Gradients scaled by 2^k come back to the same bits; a non-finite one skips the step.
TEST(LossScaleOptimizer, UnscalingIsExactAndANonFiniteGradientSkipsTheStep) {
  auto opt = make_optimizer(
      json::parse(R"({"class_name": "LossScaleOptimizer", "config": {"inner_optimizer": "sgd",
          "initial_scale": 1024.0}})"),
      "optimizer");
  Tensor g = Tensor::from_vector({3}, {0.1f * 1024.0f, -3.75f * 1024.0f, 1e-30f * 1024.0f});
  EXPECT_TRUE(opt->unscale_gradients(g, backend::cpu_backend()));
  EXPECT_EQ(g[0], 0.1f);
  EXPECT_EQ(g[1], -3.75f);
  EXPECT_EQ(g[2], 1e-30f);
  EXPECT_EQ(opt->loss_scale()->good_steps(), 1);
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::nanf("")}) {
    Tensor h = Tensor::from_vector({4}, {1.0f, 2.0f, bad, 3.0f});
    const double before = opt->loss_scale()->scale();
    EXPECT_FALSE(opt->unscale_gradients(h, backend::cpu_backend()));
    EXPECT_EQ(opt->loss_scale()->scale(), before / 2);
  }
  EXPECT_EQ(opt->loss_scale()->skipped_steps(), 3);
  // At the largest scale too: its inverse, 2^-126, is still a normal float (2^-127 would be
  // flushed to zero, and every gradient with it).
  auto largest = make_optimizer(
      json::parse(R"({"class_name": "LossScaleOptimizer", "config": {"inner_optimizer": "sgd",
          "initial_scale": 8.507059173023462e37}})"),
      "optimizer");
  ASSERT_EQ(largest->loss_scale()->scale(), std::ldexp(1.0, 126));
  Tensor big = Tensor::from_vector({2}, {std::ldexp(0.1f, 126), std::ldexp(-3.75f, 126)});
  EXPECT_TRUE(largest->unscale_gradients(big, backend::cpu_backend()));
  EXPECT_EQ(big[0], 0.1f);
  EXPECT_EQ(big[1], -3.75f);
  // Without a loss scale: nothing to undo, the gradients untouched.
  auto plain = make_optimizer(json("sgd"), "optimizer");
  Tensor h = Tensor::from_vector({1}, {std::nanf("")});
  EXPECT_TRUE(plain->unscale_gradients(h, backend::cpu_backend()));
}

// A large gradient arena takes the parallel path: an Inf in any thread's range is seen.
TEST(LossScaleOptimizer, ANonFiniteValueAnywhereInALargeArenaIsFound) {
  for (std::int64_t at : {std::int64_t{0}, std::int64_t{300'000}, std::int64_t{999'999}}) {
    Tensor g({1'000'000});
    g.fill(2.0f);
    g[at] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(backend::cpu_backend().scale_checking_finite(g, 0.5f)) << at;
    EXPECT_EQ(g[at == 0 ? 1 : 0], 1.0f);
  }
  Tensor g({1'000'000});
  g.fill(-8.0f);
  EXPECT_TRUE(backend::cpu_backend().scale_checking_finite(g, 0.25f));
  EXPECT_EQ(g[999'999], -2.0f);
}

TEST(LossScaleOptimizer, ConfigErrorsNameThePath) {
  const auto expect_path = [](const std::string& config, const std::string& path) {
    const json spec = {{"class_name", "LossScaleOptimizer"}, {"config", json::parse(config)}};
    try {
      make_optimizer(spec, "optimizer");
      ADD_FAILURE() << "no error for " << config;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + path + "'"), std::string::npos) << e.what();
    }
  };
  expect_path("{}", "optimizer.config.inner_optimizer");
  expect_path(R"({"inner_optimizer": null})", "optimizer.config.inner_optimizer");
  expect_path(R"({"inner_optimizer": "adamx"})", "optimizer.config.inner_optimizer");
  expect_path(R"({"inner_optimizer": {"class_name": "Adam", "config": {"beta_1": 2}}})",
              "optimizer.config.inner_optimizer.config.beta_1");
  expect_path(R"({"inner_optimizer": {"class_name": "LossScaleOptimizer",
                  "config": {"inner_optimizer": "adam"}}})",
              "optimizer.config.inner_optimizer.class_name");
  for (const char* scale : {"0", "-1", "1e39", "1.7014118346046923e38", "\"big\"", "1e-40"})
    expect_path(std::string(R"({"inner_optimizer": "adam", "initial_scale": )") + scale + "}",
                "optimizer.config.initial_scale");
  for (const char* steps : {"0", "1.5", "-3", "\"2000\""})
    expect_path(
        std::string(R"({"inner_optimizer": "adam", "dynamic_growth_steps": )") + steps + "}",
        "optimizer.config.dynamic_growth_steps");
  expect_path(R"({"inner_optimizer": "adam", "dynamic": "yes"})", "optimizer.config.dynamic");
  expect_path(R"({"inner_optimizer": "adam", "initial_scal": 2})", "optimizer.config.initial_scal");
  expect_path("[1]", "optimizer.config");
  // A LossScaleOptimizer scales the loss itself: an inner loss_scale_factor would be undone twice.
  expect_path(R"({"inner_optimizer": {"class_name": "Adam", "config": {"loss_scale_factor": 8}}})",
              "optimizer.config.inner_optimizer.config.loss_scale_factor");
}

// Keras 3's loss_scale_factor on an optimizer: a fixed scale (every step applied, non-finite
// gradients too, as Keras divides and goes on), written back as the optimizer's own key.
TEST(LossScaleFactor, IsAFixedScaleKeptAsTheOptimizersKey) {
  auto opt = make_optimizer(
      json::parse(R"({"class_name": "Adam", "config": {"loss_scale_factor": 1024.0}})"), "o");
  ASSERT_NE(opt->loss_scale(), nullptr);
  EXPECT_EQ(opt->loss_scale_factor(), 1024.0f);
  EXPECT_EQ(opt->keras_class_name(), "Adam");
  EXPECT_EQ(opt->keras_config().at("loss_scale_factor"), 1024.0);
  EXPECT_FALSE(opt->keras_config().contains("inner_optimizer"));
  Tensor g = Tensor::from_vector({2}, {0.1f * 1024.0f, std::numeric_limits<float>::infinity()});
  EXPECT_TRUE(opt->unscale_gradients(g, backend::cpu_backend())) << "never skipped";
  EXPECT_EQ(g[0], 0.1f);
  EXPECT_EQ(opt->loss_scale()->scale(), 1024.0) << "never moves";
  auto clone = make_optimizer(
      json{{"class_name", opt->keras_class_name()}, {"config", opt->keras_config()}}, "o");
  EXPECT_EQ(clone->loss_scale_factor(), 1024.0f);
  EXPECT_EQ(clone->keras_config(), opt->keras_config());
  for (const json& off : {json(nullptr), json(1), json(1.0)}) {
    auto plain =
        make_optimizer(json{{"class_name", "SGD"}, {"config", {{"loss_scale_factor", off}}}}, "o");
    EXPECT_EQ(plain->loss_scale(), nullptr) << off.dump();
    EXPECT_FALSE(plain->keras_config().contains("loss_scale_factor"))
        << "tf.keras 2 refuses a config naming Keras 3's key";
  }
  for (const json& bad : {json(0), json(-2), json("8"), json(1e39), json(1e-40), json(true)}) {
    try {
      make_optimizer(json{{"class_name", "SGD"}, {"config", {{"loss_scale_factor", bad}}}}, "o");
      ADD_FAILURE() << "no error for " << bad.dump();
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'o.config.loss_scale_factor'"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tandem
