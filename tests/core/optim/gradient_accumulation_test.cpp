// Keras 3's gradient_accumulation_steps N: N - 1 calls add their gradients to the optimizer's
// "gradient_accumulator" slot, the Nth updates with (g + accumulated) / N — clipped, weight
// decayed, counted as one step — and empties it. Against values by hand and against the same
// optimizer without accumulation given the combined gradients.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/kernel_math.hpp"
#include "optim/optimizer.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::vector<float> host(const Tensor& t) {
  return std::vector<float>(t.data(), t.data() + t.size());
}

struct Weights {
  Parameter p;
  explicit Weights(std::vector<float> w) {
    p.name = "kernel";
    const auto n = static_cast<std::int64_t>(w.size());
    p.value = Tensor::from_vector({n}, std::move(w));
    p.grad = Tensor({n});
  }
  void step(Optimizer& opt, const std::vector<float>& g) {
    for (std::size_t i = 0; i < g.size(); ++i) p.grad[static_cast<std::int64_t>(i)] = g[i];
    opt.apply({&p});
  }
};

std::unique_ptr<Optimizer> optimizer(const std::string& cls, const json& config) {
  return make_optimizer(json{{"class_name", cls}, {"config", config}}, "optimizer");
}

// SGD at rate 0.1, N = 2: the first call only accumulates; the second steps by the mean.
TEST(GradientAccumulation, TheNthCallStepsByTheMeanOfTheGradients) {
  auto sgd = optimizer("SGD", {{"learning_rate", 0.1}, {"gradient_accumulation_steps", 2}});
  EXPECT_EQ(sgd->slot_names(), std::vector<std::string>{"gradient_accumulator"});
  Weights w({1.0f, -2.0f});
  w.step(*sgd, {0.5f, -1.0f});
  EXPECT_EQ(host(w.p.value), (std::vector<float>{1.0f, -2.0f})) << "no update yet";
  EXPECT_EQ(host(sgd->slots(0)[0]), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(sgd->iterations(), 1) << "Keras counts every call";
  w.step(*sgd, {0.1f, 0.4f});
  // w -= 0.1 (g1 + g2) / 2 = [0.03, -0.03]
  EXPECT_NEAR(w.p.value[0], 0.97f, 1e-6);
  EXPECT_NEAR(w.p.value[1], -1.97f, 1e-6);
  EXPECT_EQ(host(sgd->slots(0)[0]), (std::vector<float>{0.0f, 0.0f})) << "emptied";
}

// Adam with weight decay and clipnorm, N = 3, over six calls: the bits of the same Adam over two
// steps given the combined gradients ((g1 + g2) + g3) / 3 — so the bias correction counts
// updates, and decay and clipping apply to the combined gradient, once per update.
TEST(GradientAccumulation, AdamAccumulatingIsAdamOnTheCombinedGradients) {
  const json adam = {{"learning_rate", 0.05}, {"weight_decay", 0.01}, {"clipnorm", 0.3}};
  json accumulating = adam;
  accumulating["gradient_accumulation_steps"] = 3;
  auto acc = optimizer("Adam", accumulating);
  auto plain = optimizer("Adam", adam);
  const std::vector<std::vector<float>> g = {{0.5f, -1.0f, 0.25f}, {0.1f, 0.4f, -0.7f},
                                             {-0.3f, 0.2f, 0.9f},  {0.6f, -0.1f, 0.05f},
                                             {0.2f, 0.2f, -0.4f},  {-0.8f, 0.3f, 0.1f}};
  Weights a({1.0f, -2.0f, 0.5f}), b({1.0f, -2.0f, 0.5f});
  for (const auto& gi : g) a.step(*acc, gi);
  for (int update = 0; update < 2; ++update) {
    std::vector<float> combined(3);
    for (std::size_t i = 0; i < 3; ++i) {
      const std::size_t k = static_cast<std::size_t>(3 * update);
      combined[i] = ((g[k][i] + g[k + 1][i]) + g[k + 2][i]) / 3.0f;
    }
    b.step(*plain, combined);
  }
  EXPECT_EQ(host(a.p.value), host(b.p.value));
  EXPECT_NE(host(a.p.value), (std::vector<float>{1.0f, -2.0f, 0.5f})) << "the weights moved";
  EXPECT_EQ(host(acc->slots(0)[0]), host(plain->slots(0)[0])) << "m";
  EXPECT_EQ(acc->iterations(), 6);
}

// Keras' schedule follows its iterations variable, which counts calls: after 4 calls of N = 2
// the rate is the schedule's at 4.
TEST(GradientAccumulation, AScheduleFollowsTheCalls) {
  auto sgd = optimizer(
      "SGD",
      {{"gradient_accumulation_steps", 2},
       {"learning_rate",
        {{"class_name", "ExponentialDecay"},
         {"config", {{"initial_learning_rate", 0.1}, {"decay_steps", 1}, {"decay_rate", 0.5}}}}}});
  Weights w({1.0f});
  for (int call = 0; call < 4; ++call) w.step(*sgd, {0.2f});
  EXPECT_DOUBLE_EQ(sgd->learning_rate(), 0.1 * 0.5 * 0.5 * 0.5 * 0.5);
  // Updates at calls 2 and 4, at the rates of iterations 1 and 3 (0.05 and 0.0125)
  EXPECT_NEAR(w.p.value[0], 1.0f - 0.2f * (0.05f + 0.0125f), 1e-6);
}

// With use_ema, Keras moves the average at every call, the accumulating ones too (the weights
// unchanged then), its first-step momentum of 0 lasting the first N calls. SGD 0.1, N = 2,
// m = 0.5, gradients 0.2 and 0.4 in turn: w = 1, 0.97, 0.94, 0.91 after the updates; the
// average 1, 0.97, 0.97, 0.955, 0.9475, 0.92875 after the calls (0.9325 if it moved only with
// the updates).
TEST(GradientAccumulation, TheMovingAverageMovesAtEveryCallAsKerasMovesIt) {
  auto sgd = optimizer("SGD", {{"learning_rate", 0.1},
                               {"gradient_accumulation_steps", 2},
                               {"use_ema", true},
                               {"ema_momentum", 0.5}});
  EXPECT_EQ(sgd->slot_names(), (std::vector<std::string>{"average", "gradient_accumulator"}));
  Weights w({1.0f});
  const std::vector<double> averages = {1.0, 0.97, 0.97, 0.955, 0.9475, 0.92875};
  for (int call = 0; call < 6; ++call) {
    w.step(*sgd, {call % 2 == 0 ? 0.2f : 0.4f});
    EXPECT_NEAR(sgd->slots(0)[0][0], averages[static_cast<std::size_t>(call)], 1e-6) << call;
  }
  EXPECT_NEAR(w.p.value[0], 0.91f, 1e-6);
  // Six calls of N = 2 leave nothing accumulated; a seventh leaves its gradient there, and the
  // end of fit takes the average, not that.
  w.step(*sgd, {0.2f});
  ASSERT_TRUE(sgd->use_moving_averages({&w.p}));
  EXPECT_NEAR(w.p.value[0], 0.5 * 0.92875 + 0.5 * 0.91, 1e-6);
}

TEST(GradientAccumulation, BadCountsAreRefusedAtTheKeyAndOffValuesAccepted) {
  for (const json& bad : {json(-1), json(2.5), json("4"), json(10'000'000), json(true)}) {
    try {
      optimizer("Adam", {{"gradient_accumulation_steps", bad}});
      ADD_FAILURE() << "no error for " << bad.dump();
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'optimizer.config.gradient_accumulation_steps'"),
                std::string::npos)
          << e.what();
    }
  }
  for (const json& off : {json(nullptr), json(0), json(1)}) {
    auto adam = optimizer("Adam", {{"gradient_accumulation_steps", off}});
    EXPECT_EQ(adam->slot_names(), (std::vector<std::string>{"m", "v"})) << off.dump();
    EXPECT_FALSE(adam->config().contains("gradient_accumulation_steps"))
        << off.dump() << ": tf.keras 2 refuses a config naming Keras 3's key";
  }
  const json c = optimizer("Adam", {{"gradient_accumulation_steps", 4}})->config();
  EXPECT_EQ(c.at("gradient_accumulation_steps"), 4);
  EXPECT_EQ(make_optimizer(json{{"class_name", "Adam"}, {"config", c}}, "o")
                ->desc()
                .gradient_accumulation_steps,
            4)
      << "a clone accumulates alike";
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
