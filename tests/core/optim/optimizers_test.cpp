// Each optimizer's update against values computed by hand from the Keras update rules.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <utility>
#include <vector>

#include "backend/kernel_math.hpp"
#include "optim/optimizer.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// One parameter w = [1, -2] with gradients g1 = [0.5, -1] then g2 = [0.1, 0.4].
struct Fixture {
  Parameter p;
  Fixture() {
    p.name = "kernel";
    p.value = Tensor::from_vector({2}, {1.0f, -2.0f});
    p.grad = Tensor({2});
  }
  void step(Optimizer& opt, float g0, float g1) {
    p.grad[0] = g0;
    p.grad[1] = g1;
    opt.apply({&p});
  }
};

TEST(Optimizers, PlainSgd) {
  auto opt = make_optimizer(json{{"class_name", "SGD"}, {"config", {{"learning_rate", 0.1}}}},
                            "optimizer");
  Fixture f;
  f.step(*opt, 0.5f, -1.0f);
  EXPECT_FLOAT_EQ(f.p.value[0], 1.0f - 0.05f);
  EXPECT_FLOAT_EQ(f.p.value[1], -2.0f + 0.1f);
  EXPECT_EQ(opt->iterations(), 1);
}

TEST(Optimizers, SgdMomentumAndNesterov) {
  // Keras: m = mu m - lr g; w += m (nesterov: w += mu m - lr g). lr 0.1, mu 0.9.
  for (bool nesterov : {false, true}) {
    auto opt = make_optimizer(
        json{{"class_name", "SGD"},
             {"config", {{"learning_rate", 0.1}, {"momentum", 0.9}, {"nesterov", nesterov}}}},
        "optimizer");
    Fixture f;
    f.step(*opt, 0.5f, -1.0f);
    f.step(*opt, 0.1f, 0.4f);
    // element 0: m1 = -0.05; step 1 w = 1 - 0.05 (plain) or 1 + 0.9*(-0.05) - 0.05 = 0.905
    //            m2 = 0.9*(-0.05) - 0.01 = -0.055; plain w = 0.95 - 0.055 = 0.895
    //            nesterov w = 0.905 + 0.9*(-0.055) - 0.01 = 0.8455
    EXPECT_NEAR(f.p.value[0], nesterov ? 0.8455f : 0.895f, 1e-6) << nesterov;
    // element 1: m1 = 0.1; m2 = 0.09 - 0.04 = 0.05; plain w = -2 + 0.1 + 0.05 = -1.85
    //            nesterov: -2 + (0.09 + 0.1) = -1.81; then + (0.045 - 0.04) = -1.805
    EXPECT_NEAR(f.p.value[1], nesterov ? -1.805f : -1.85f, 1e-6) << nesterov;
    EXPECT_EQ(opt->slot_names(), std::vector<std::string>{"momentum"});
  }
}

TEST(Optimizers, AdamTwoSteps) {
  auto opt = make_optimizer(json{{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}},
                            "optimizer");
  Fixture f;
  f.step(*opt, 0.5f, -1.0f);
  f.step(*opt, 0.1f, 0.4f);
  // Reference in double with the Keras rule.
  double w[2] = {1, -2}, m[2] = {0, 0}, v[2] = {0, 0};
  const double g[2][2] = {{0.5, -1}, {0.1, 0.4}};
  for (int t = 1; t <= 2; ++t) {
    const double alpha = 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    for (int i = 0; i < 2; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[t - 1][i];
      v[i] = 0.999 * v[i] + 0.001 * g[t - 1][i] * g[t - 1][i];
      w[i] -= alpha * m[i] / (std::sqrt(v[i]) + 1e-7);
    }
  }
  EXPECT_NEAR(f.p.value[0], w[0], 1e-6);
  EXPECT_NEAR(f.p.value[1], w[1], 1e-6);
  // Hand value: Adam's first step moves each weight by lr against the gradient's sign
  // (m/sqrt(v) = g/|g| after bias correction).
  Fixture one;
  auto fresh =
      make_optimizer(json{{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}, "o");
  one.step(*fresh, 0.5f, -1.0f);
  EXPECT_NEAR(one.p.value[0], 0.99f, 1e-6);
  EXPECT_NEAR(one.p.value[1], -1.99f, 1e-6);
  // Slots hold m and v (float32: 1 - 0.999f is 0.00099998713, hence the relative 1e-4).
  EXPECT_NEAR(opt->slots(0)[0][0], m[0], 1e-4 * std::fabs(m[0]));
  EXPECT_NEAR(opt->slots(0)[1][1], v[1], 1e-4 * std::fabs(v[1]));
}

TEST(Optimizers, AdamWDecaysWeightsDecoupled) {
  // Keras 3: w -= lr * wd * w first, then the Adam update. Zero gradient isolates the decay.
  auto opt = make_optimizer(
      json{{"class_name", "AdamW"}, {"config", {{"learning_rate", 0.1}, {"weight_decay", 0.5}}}},
      "optimizer");
  Fixture f;
  f.step(*opt, 0.0f, 0.0f);
  EXPECT_FLOAT_EQ(f.p.value[0], 1.0f * (1 - 0.05f));
  EXPECT_FLOAT_EQ(f.p.value[1], -2.0f * (1 - 0.05f));
  EXPECT_EQ(opt->config()["weight_decay"], 0.5);
  // AdamW's Keras default weight decay is 0.004.
  EXPECT_DOUBLE_EQ(make_optimizer("adamw", "o")->config()["weight_decay"].get<double>(), 0.004);
}

TEST(Optimizers, WeightDecayIsKerasFloatProductsAtASmallRate) {
  // Keras' _apply_weight_decay: w - w * wd * lr in float32, each product rounded. At lr wd = 1e-7
  // rounding 1 - lr wd to float instead (torch's AdamW factor: 1.19e-7) decayed a weight of 0.05
  // twice as much as Keras over 2,000 steps; Keras' own float arithmetic is the reference, bit
  // for bit.
  const float lr = 1e-3f, wd = 1e-4f;
  auto opt = make_optimizer(
      json{{"class_name", "SGD"}, {"config", {{"learning_rate", 1e-3}, {"weight_decay", 1e-4}}}},
      "optimizer");
  Fixture f;
  f.p.value[0] = 0.05f;
  f.p.value[1] = -1.5f;
  float keras[2] = {0.05f, -1.5f};
  for (int step = 0; step < 2000; ++step) {
    f.step(*opt, 0.0f, 0.0f);
    for (float& w : keras) w = w - (w * wd) * lr;
  }
  EXPECT_EQ(f.p.value[0], keras[0]);
  EXPECT_EQ(f.p.value[1], keras[1]);
  const float factor = static_cast<float>(1.0 - 1e-3 * 1e-4);  // the old rule, for contrast
  float old = 0.05f;
  for (int step = 0; step < 2000; ++step) old = old - old * (1.0f - factor);
  EXPECT_NE(old, keras[0]);
}

TEST(Optimizers, RmspropPlainCenteredAndMomentum) {
  const double lr = 0.01, rho = 0.9, eps = 1e-7, mu = 0.5;
  for (int variant = 0; variant < 3; ++variant) {
    const bool centered = variant == 1, momentum = variant == 2;
    json cfg = {{"learning_rate", lr}, {"centered", centered}, {"momentum", momentum ? mu : 0.0}};
    auto opt = make_optimizer(json{{"class_name", "RMSprop"}, {"config", cfg}}, "optimizer");
    Fixture f;
    f.step(*opt, 0.5f, -1.0f);
    f.step(*opt, 0.1f, 0.4f);
    double w[2] = {1, -2}, vel[2] = {0, 0}, avg[2] = {0, 0}, mom[2] = {0, 0};
    const double g[2][2] = {{0.5, -1}, {0.1, 0.4}};
    for (int t = 0; t < 2; ++t)
      for (int i = 0; i < 2; ++i) {
        vel[i] = rho * vel[i] + (1 - rho) * g[t][i] * g[t][i];
        double denom = vel[i] + eps;
        if (centered) {
          avg[i] = rho * avg[i] + (1 - rho) * g[t][i];
          denom = vel[i] - avg[i] * avg[i] + eps;
        }
        const double inc = lr * g[t][i] / std::sqrt(denom);
        if (momentum) {
          mom[i] = mu * mom[i] + inc;
          w[i] -= mom[i];
        } else {
          w[i] -= inc;
        }
      }
    EXPECT_NEAR(f.p.value[0], w[0], 1e-5) << variant;
    EXPECT_NEAR(f.p.value[1], w[1], 1e-5) << variant;
  }
}

TEST(Optimizers, GradientClipping) {
  // clipnorm 0.5 scales the gradient [0.6, -0.8] (norm 1) to [0.3, -0.4].
  auto opt = make_optimizer(
      json{{"class_name", "SGD"}, {"config", {{"learning_rate", 1.0}, {"clipnorm", 0.5}}}}, "o");
  Fixture f;
  f.step(*opt, 0.6f, -0.8f);
  EXPECT_NEAR(f.p.value[0], 1.0f - 0.3f, 1e-6);
  EXPECT_NEAR(f.p.value[1], -2.0f + 0.4f, 1e-6);
  auto cv = make_optimizer(
      json{{"class_name", "SGD"}, {"config", {{"learning_rate", 1.0}, {"clipvalue", 0.1}}}}, "o");
  Fixture h;
  h.step(*cv, 0.6f, -0.8f);
  EXPECT_NEAR(h.p.value[0], 0.9f, 1e-6);
  EXPECT_NEAR(h.p.value[1], -1.9f, 1e-6);
  // Two of them are refused at the second, as Keras 3 refuses them (Tandem applied both).
  for (const auto& [first, second] :
       {std::pair{"clipnorm", "clipvalue"}, std::pair{"clipnorm", "global_clipnorm"},
        std::pair{"clipvalue", "global_clipnorm"}}) {
    try {
      make_optimizer(json{{"class_name", "SGD"}, {"config", {{first, 0.3}, {second, 0.05}}}},
                     "optimizer");
      ADD_FAILURE() << first << " and " << second << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'optimizer.config.") + second + "'"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(first), std::string::npos) << e.what();
    }
  }
  // Keras' own serialisation writes the others as null: one set is taken.
  EXPECT_NO_THROW(make_optimizer(
      json::parse(R"({"class_name": "SGD", "config": {"clipnorm": 1.0, "clipvalue": null,
                      "global_clipnorm": null}})"),
      "optimizer"));
}

TEST(Optimizers, LearningRateCanChangeBetweenSteps) {
  auto opt = make_optimizer("sgd", "optimizer");
  EXPECT_DOUBLE_EQ(opt->learning_rate(), 0.01);  // Keras default
  Fixture f;
  opt->set_learning_rate(1.0);
  f.step(*opt, 0.5f, 0.0f);
  EXPECT_FLOAT_EQ(f.p.value[0], 0.5f);
}

TEST(Optimizers, Keras2LegacyLrAndTimeBasedDecay) {
  // SGD(lr=0.1, decay=0.5), as Keras 2 wrote it: step t uses 0.1 / (1 + 0.5 (t - 1)).
  auto opt = make_optimizer(
      json::parse(R"({"class_name": "SGD", "config": {"name": "SGD", "lr": 0.1, "decay": 0.5,
                      "momentum": 0.0, "nesterov": false}})"),
      "optimizer");
  EXPECT_DOUBLE_EQ(opt->learning_rate(), 0.1);
  EXPECT_DOUBLE_EQ(opt->decay(), 0.5);
  Fixture f;
  f.step(*opt, 1.0f, 0.0f);  // lr 0.1
  EXPECT_FLOAT_EQ(f.p.value[0], 0.9f);
  f.step(*opt, 1.0f, 0.0f);  // lr 0.1 / 1.5
  EXPECT_FLOAT_EQ(f.p.value[0], 0.9f - static_cast<float>(0.1 / 1.5));
  f.step(*opt, 1.0f, 0.0f);  // lr 0.1 / 2
  EXPECT_FLOAT_EQ(f.p.value[0], 0.9f - static_cast<float>(0.1 / 1.5) - 0.05f);
  EXPECT_DOUBLE_EQ(opt->step_learning_rate(), 0.05);
  EXPECT_EQ(opt->config()["decay"], 0.5);
  // Keras 2's usual decay 0.0 is no decay; lr and learning_rate together are refused.
  auto plain = make_optimizer(
      json::parse(R"({"class_name": "Adam", "config": {"lr": 0.002, "decay": 0.0}})"), "o");
  EXPECT_DOUBLE_EQ(plain->learning_rate(), 0.002);
  EXPECT_FALSE(plain->config().contains("decay"));
  EXPECT_THROW(make_optimizer(json::parse(R"({"class_name": "Adam", "config": {"lr": 0.002,
                                             "learning_rate": 0.001}})"),
                              "o"),
               ConfigError);
  EXPECT_THROW(make_optimizer(json::parse(R"({"class_name": "SGD", "config": {"decay": -1}})"),
                              "o"),
               ConfigError);
}

TEST(Optimizers, Keras2LegacyNadamDecayIsItsMomentumSchedule) {
  // tf-keras' legacy/nadam.py: `decay` (0.004 in every config it writes) decays the momentum
  // schedule, m_t = beta_1 (1 - 0.5 * 0.96^(decay t)), and the learning rate stays; Keras 3's
  // Nadam (no decay key) takes 0.96^t. Reference: the legacy update written out in double.
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-7;
  const float grads[3][2] = {{0.5f, -1.0f}, {0.1f, 0.4f}, {-0.3f, 0.2f}};
  for (const double decay : {0.004, 0.5}) {
    auto opt = make_optimizer(
        json{{"class_name", "Nadam"}, {"config", {{"learning_rate", lr}, {"decay", decay}}}},
        "optimizer");
    Fixture f;
    double w[2] = {1.0, -2.0}, m[2] = {0, 0}, v[2] = {0, 0}, cache = 1.0;
    for (int t = 1; t <= 3; ++t) {
      const double mt = b1 * (1 - 0.5 * std::pow(0.96, decay * t));
      const double mt1 = b1 * (1 - 0.5 * std::pow(0.96, decay * (t + 1)));
      const double schedule = cache * mt, schedule_next = schedule * mt1;
      cache = schedule;
      for (int i = 0; i < 2; ++i) {
        const double g = grads[t - 1][i];
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        const double m_bar = (1 - mt) * g / (1 - schedule) + mt1 * m[i] / (1 - schedule_next);
        w[i] -= lr * m_bar / (std::sqrt(v[i] / (1 - std::pow(b2, t))) + eps);
      }
      f.step(*opt, grads[t - 1][0], grads[t - 1][1]);
      EXPECT_NEAR(f.p.value[0], w[0], 2e-6) << "decay " << decay << ", step " << t;
      EXPECT_NEAR(f.p.value[1], w[1], 2e-6) << "decay " << decay << ", step " << t;
    }
    EXPECT_DOUBLE_EQ(opt->step_learning_rate(), lr);  // not Keras 2's lr / (1 + decay t)
    EXPECT_EQ(opt->config()["decay"], decay);         // and so it resumes
  }
  // The schedules differ: after 3 steps of the same gradients, Keras 3's Nadam is elsewhere.
  auto keras3 = make_optimizer(json{{"class_name", "Nadam"}, {"config", {{"learning_rate", lr}}}},
                               "optimizer");
  auto legacy = make_optimizer(
      json{{"class_name", "Nadam"}, {"config", {{"learning_rate", lr}, {"decay", 0.004}}}},
      "optimizer");
  Fixture a, b;
  for (const auto& g : grads) {
    a.step(*keras3, g[0], g[1]);
    b.step(*legacy, g[0], g[1]);
  }
  EXPECT_GT(std::fabs(a.p.value[0] - b.p.value[0]), 1e-4);
  EXPECT_FALSE(keras3->config().contains("decay"));
}

// Nadam's momentum product u_1 ··· u_t, remembered between steps: the same bits as multiplying
// it out from u_1 whatever steps were asked before (later, earlier, other settings), and one
// multiplication a step — 200 steps after step 1,000,000 take milliseconds, where multiplying
// out each one (a pow per factor) took seconds.
TEST(Optimizers, NadamMomentumProductIsTheProductFromTheFirstStepAndCostsAStepAStep) {
  backend::OptimizerDesc keras3;
  keras3.kind = backend::OptimizerDesc::Kind::nadam;
  keras3.beta_1 = 0.9;
  backend::OptimizerDesc legacy = keras3;
  legacy.nadam_schedule_decay = 0.004;
  const auto from_scratch = [](const backend::OptimizerDesc& o, std::int64_t step) {
    double product = 1.0;
    for (std::int64_t i = 1; i <= step; ++i) product *= backend::math::nadam_momentum(o, i);
    return product;
  };
  for (const auto& [o, step] :
       std::vector<std::pair<backend::OptimizerDesc, std::int64_t>>{{keras3, 5},
                                                                    {keras3, 6},
                                                                    {keras3, 40},
                                                                    {keras3, 3},
                                                                    {legacy, 3},
                                                                    {legacy, 700},
                                                                    {keras3, 700},
                                                                    {keras3, 699},
                                                                    {legacy, 1},
                                                                    {keras3, 1}})
    EXPECT_EQ(backend::math::nadam_momentum_product(o, step), from_scratch(o, step))
        << o.nadam_schedule_decay << " at step " << step;
  const auto start = std::chrono::steady_clock::now();
  double last = 0;
  for (std::int64_t step = 1'000'000; step < 1'000'200; ++step)
    last = backend::math::optimizer_step(legacy, step, 0.01).nadam_one_minus_product;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
  EXPECT_EQ(last, static_cast<float>(1.0 - from_scratch(legacy, 1'000'199)));
}

TEST(Optimizers, ConfigErrorsNameThePath) {
  auto expect_path = [](const json& spec, const std::string& path) {
    try {
      make_optimizer(spec, "optimizer");
      ADD_FAILURE() << "no error for " << spec.dump();
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + path + "'"), std::string::npos) << e.what();
    }
  };
  expect_path(json{{"class_name", "Adamx"}}, "optimizer.class_name");
  expect_path(json{{"class_name", "Adam"}, {"config", {{"learning_rate", -1}}}},
              "optimizer.config.learning_rate");
  expect_path(json{{"class_name", "Adam"}, {"config", {{"beta_1", 1.5}}}},
              "optimizer.config.beta_1");
  // Lion's beta_1 is in Keras' (0, 1]: 0 is refused, 1 taken.
  expect_path(json{{"class_name", "Lion"}, {"config", {{"beta_1", 0.0}}}},
              "optimizer.config.beta_1");
  EXPECT_NO_THROW(
      make_optimizer(json{{"class_name", "Lion"}, {"config", {{"beta_1", 1.0}}}}, "optimizer"));
  expect_path(json{{"class_name", "SGD"}, {"config", {{"momentun", 0.9}}}},
              "optimizer.config.momentun");
  expect_path(json{{"class_name", "SGD"}, {"config", {{"nesterov", "true"}}}},
              "optimizer.config.nesterov");
  expect_path(json(3), "optimizer");
  // What Keras 3 writes into every optimizer's config, at the values that turn it off (each is
  // implemented: moving_average_test.cpp, gradient_accumulation_test.cpp, loss_scale_test.cpp).
  EXPECT_NO_THROW(make_optimizer(
      json::parse(R"({"class_name": "Adam", "config": {"use_ema": false, "ema_momentum": 0.99,
          "ema_overwrite_frequency": null, "loss_scale_factor": null,
          "gradient_accumulation_steps": null, "jit_compile": true}})"),
      "optimizer"));
  EXPECT_NO_THROW(make_optimizer(
      json::parse(R"({"class_name": "SGD", "config": {"gradient_accumulation_steps": 1,
          "loss_scale_factor": 1.0}})"),
      "optimizer"));
  expect_path(json{{"class_name", "Adam"}, {"config", {{"use_ema", "no"}}}},
              "optimizer.config.use_ema");
}

}  // namespace
}  // namespace tandem
