// Keras' use_ema: the moving average of each weight, kept as the optimizer's last slot
// ("average"), its two starts (Keras 3: the first step's weights; tf.keras 2.11+: the weights
// before it), ema_overwrite_frequency, and the averages taken at the end of fit
// (use_moving_averages) — against values worked out by hand.
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

// Plain SGD at rate 0.1 on w = [1, -2] over three gradients: the weights after each step are
// w1 = [0.95, -1.9], w2 = [0.94, -1.94], w3 = [0.96, -1.97].
struct Sgd {
  Parameter p;
  std::unique_ptr<Optimizer> opt;
  explicit Sgd(json ema) {
    ema["learning_rate"] = 0.1;
    opt = make_optimizer(json{{"class_name", "SGD"}, {"config", ema}}, "optimizer");
    p.name = "kernel";
    p.value = Tensor::from_vector({2}, {1.0f, -2.0f});
    p.grad = Tensor({2});
  }
  void step(float g0, float g1) {
    p.grad[0] = g0;
    p.grad[1] = g1;
    opt->apply({&p});
  }
  void three_steps() {
    step(0.5f, -1.0f);
    step(0.1f, 0.4f);
    step(-0.2f, 0.3f);
  }
  std::vector<float> average() { return host(opt->slots(0).back()); }
  std::vector<float> weights() { return host(p.value); }
};

void expect_near(const std::vector<float>& got, std::vector<double> want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << what << i;
}

// Keras 3 (base_optimizer.py): the average starts at zero and the first step's momentum is 0,
// so a1 = w1; then a = 0.9 a + 0.1 w. The weights themselves are SGD's, untouched.
TEST(MovingAverage, KerasThreeStartsAtTheFirstStepsWeights) {
  Sgd s({{"use_ema", true}, {"ema_momentum", 0.9}});
  EXPECT_EQ(s.opt->slot_names(), std::vector<std::string>{"average"});
  s.step(0.5f, -1.0f);
  expect_near(s.average(), {0.95, -1.9}, "a1 = w1");
  s.step(0.1f, 0.4f);
  expect_near(s.average(), {0.9 * 0.95 + 0.1 * 0.94, 0.9 * -1.9 + 0.1 * -1.94}, "a2");
  s.step(-0.2f, 0.3f);
  expect_near(s.average(), {0.9 * 0.949 + 0.1 * 0.96, 0.9 * -1.904 + 0.1 * -1.97}, "a3");
  expect_near(s.weights(), {0.96, -1.97}, "the weights are SGD's");
  ASSERT_TRUE(s.opt->use_moving_averages({&s.p}));
  expect_near(s.weights(), {0.9501, -1.9106}, "the end of fit: w = a3");
}

// tf.keras 2.11+ (optimizer.py: the average a copy of the weight at build, every step with
// momentum m), recognised by the is_legacy_optimizer key it writes into every config:
// a1 = 0.9 w0 + 0.1 w1.
TEST(MovingAverage, KerasTwoStartsAtTheWeightsBeforeTheFirstStep) {
  Sgd s({{"use_ema", true}, {"ema_momentum", 0.9}, {"is_legacy_optimizer", false}});
  s.step(0.5f, -1.0f);
  expect_near(s.average(), {0.9 * 1.0 + 0.1 * 0.95, 0.9 * -2.0 + 0.1 * -1.9}, "a1");
  s.step(0.1f, 0.4f);
  s.step(-0.2f, 0.3f);
  // a2 = [0.9895, -1.985]; a3 = 0.9 a2 + 0.1 w3
  expect_near(s.average(), {0.9 * 0.9895 + 0.1 * 0.96, 0.9 * -1.985 + 0.1 * -1.97}, "a3");
  EXPECT_EQ(s.opt->config().value("is_legacy_optimizer", true), false) << "kept for its clones";
}

// ema_overwrite_frequency 2: after step 2 the weights are the average, and step 3 goes on from
// there: w3 = a2 - 0.1 g3 = [0.969, -1.934], a3 = 0.9 a2 + 0.1 w3.
TEST(MovingAverage, AnOverwriteStepGivesTheWeightsTheAverage) {
  Sgd s({{"use_ema", true}, {"ema_momentum", 0.9}, {"ema_overwrite_frequency", 2}});
  s.step(0.5f, -1.0f);
  expect_near(s.weights(), {0.95, -1.9}, "step 1 overwrites nothing");
  s.step(0.1f, 0.4f);
  expect_near(s.weights(), {0.949, -1.904}, "step 2: w = a2");
  s.step(-0.2f, 0.3f);
  expect_near(s.weights(), {0.969, -1.934}, "w3");
  expect_near(s.average(), {0.9 * 0.949 + 0.1 * 0.969, 0.9 * -1.904 + 0.1 * -1.934}, "a3");
}

// The average follows the rule's own slots (Adam's m and v stay where update_element reads them),
// and without use_ema there is no average to take.
TEST(MovingAverage, TheAverageIsTheLastSlotAndNothingIsTakenWithoutIt) {
  auto adam = make_optimizer(json{{"class_name", "Adam"}, {"config", {{"use_ema", true}}}}, "o");
  EXPECT_EQ(adam->slot_names(), (std::vector<std::string>{"m", "v", "average"}));
  EXPECT_EQ(backend::math::optimizer_slot_count(adam->desc()), 3);
  EXPECT_EQ(backend::math::update_slot_count(adam->desc()), 2);
  auto plain = make_optimizer(json{{"class_name", "Adam"}, {"config", json::object()}}, "o");
  Parameter p;
  p.value = Tensor::from_vector({2}, {1.0f, 2.0f});
  p.grad = Tensor::from_vector({2}, {0.5f, 0.5f});
  plain->apply({&p});
  const std::vector<float> after = host(p.value);
  EXPECT_FALSE(plain->use_moving_averages({&p}));
  EXPECT_EQ(host(p.value), after);
  // An optimizer with use_ema that has not stepped has no averages yet.
  Sgd fresh(json{{"use_ema", true}});
  EXPECT_FALSE(fresh.opt->use_moving_averages({&fresh.p}));
  expect_near(fresh.weights(), {1.0, -2.0}, "untouched");
}

// The config says it all, as Keras' get_config does, and a clone made from it (each replica's
// optimizer is) averages alike.
TEST(MovingAverage, TheConfigRoundTripsThroughAClone) {
  Sgd s({{"use_ema", true}, {"ema_momentum", 0.8}, {"ema_overwrite_frequency", 3}});
  const json c = s.opt->config();
  EXPECT_EQ(c.at("use_ema"), true);
  EXPECT_DOUBLE_EQ(c.at("ema_momentum").get<double>(), 0.8);
  EXPECT_EQ(c.at("ema_overwrite_frequency"), 3);
  EXPECT_FALSE(c.contains("is_legacy_optimizer"));
  auto clone = make_optimizer(json{{"class_name", "SGD"}, {"config", c}}, "optimizer");
  const backend::OptimizerDesc a = s.opt->desc(), b = clone->desc();
  EXPECT_TRUE(b.use_ema);
  EXPECT_EQ(a.ema_momentum, b.ema_momentum);
  EXPECT_EQ(a.ema_overwrite_frequency, b.ema_overwrite_frequency);
  EXPECT_EQ(a.ema_keras2, b.ema_keras2);
  const json off = make_optimizer("adam", "o")->config();
  EXPECT_EQ(off.at("use_ema"), false);
  EXPECT_TRUE(off.at("ema_overwrite_frequency").is_null()) << "Keras' None";
}

TEST(MovingAverage, BadSettingsAreRefusedAtTheirKey) {
  const auto expect_path = [](const json& config, const std::string& path) {
    try {
      make_optimizer(json{{"class_name", "Adam"}, {"config", config}}, "optimizer");
      ADD_FAILURE() << "no error for " << config.dump();
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + path + "'"), std::string::npos) << e.what();
    }
  };
  expect_path({{"use_ema", "yes"}}, "optimizer.config.use_ema");
  expect_path({{"use_ema", true}, {"ema_momentum", 1.5}}, "optimizer.config.ema_momentum");
  expect_path({{"use_ema", true}, {"ema_momentum", -0.1}}, "optimizer.config.ema_momentum");
  expect_path({{"use_ema", true}, {"ema_momentum", "0.9"}}, "optimizer.config.ema_momentum");
  expect_path({{"use_ema", true}, {"ema_overwrite_frequency", -1}},
              "optimizer.config.ema_overwrite_frequency");
  expect_path({{"use_ema", true}, {"ema_overwrite_frequency", 2.5}},
              "optimizer.config.ema_overwrite_frequency");
  expect_path({{"use_ema", true}, {"ema_overwrite_frequency", "10"}},
              "optimizer.config.ema_overwrite_frequency");
  // Keras 2's legacy optimizers have no moving average.
  expect_path({{"use_ema", true}, {"is_legacy_optimizer", true}}, "optimizer.config.use_ema");
  expect_path({{"is_legacy_optimizer", "no"}}, "optimizer.config.is_legacy_optimizer");
  // What to_json() writes by default, and Keras' 0 for never (falsy, as None).
  EXPECT_NO_THROW(make_optimizer(
      json{{"class_name", "Adam"}, {"config", {{"use_ema", true}, {"ema_overwrite_frequency", 0}}}},
      "optimizer"));
  EXPECT_NO_THROW(make_optimizer(
      json{{"class_name", "Adam"},
           {"config",
            {{"use_ema", false}, {"ema_momentum", 0.99}, {"ema_overwrite_frequency", nullptr}}}},
      "optimizer"));
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
