// Keras' learning rate schedules as an optimizer's learning_rate: each schedule's rates at chosen
// steps against values worked out by hand from Keras 3's formulas
// (keras/src/optimizers/schedules/learning_rate_schedule.py), the update made after t updates
// using the rate at t (Keras' optimizer calls its schedule with `iterations`), the Keras form
// written back and read again, a rate that follows a schedule refusing to be set, and bad
// schedules refused at their key.
#include "optim/learning_rate_schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "backend/ops.hpp"
#include "optim/optimizer.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json schedule(const std::string& name, const json& config) {
  return {{"module", "keras.optimizers.schedules"},
          {"class_name", name},
          {"config", config},
          {"registered_name", nullptr}};
}

double rate(const json& s, std::int64_t step) {
  return make_learning_rate_schedule(s, "lr")->at(step);
}

TEST(LearningRateSchedule, EachScheduleGivesKerasRatesAtItsSteps) {
  const json exponential =
      schedule("ExponentialDecay",
               {{"initial_learning_rate", 0.1}, {"decay_steps", 10}, {"decay_rate", 0.5}});
  EXPECT_DOUBLE_EQ(rate(exponential, 0), 0.1);
  EXPECT_DOUBLE_EQ(rate(exponential, 5), 0.1 * std::sqrt(0.5));
  EXPECT_DOUBLE_EQ(rate(exponential, 20), 0.025);
  json stairs = exponential;
  stairs["config"]["staircase"] = true;
  EXPECT_DOUBLE_EQ(rate(stairs, 15), 0.05);

  const json piecewise =
      schedule("PiecewiseConstantDecay", {{"boundaries", {10, 20}}, {"values", {1.0, 0.5, 0.1}}});
  EXPECT_EQ(rate(piecewise, 10), 1.0);  // step <= boundaries[0]
  EXPECT_EQ(rate(piecewise, 11), 0.5);
  EXPECT_EQ(rate(piecewise, 20), 0.5);
  EXPECT_EQ(rate(piecewise, 21), 0.1);

  json polynomial = schedule("PolynomialDecay", {{"initial_learning_rate", 1.0},
                                                 {"decay_steps", 10},
                                                 {"end_learning_rate", 0.1},
                                                 {"power", 2.0}});
  EXPECT_DOUBLE_EQ(rate(polynomial, 5), 0.9 * 0.25 + 0.1);
  EXPECT_DOUBLE_EQ(rate(polynomial, 20), 0.1);  // held at the end
  polynomial["config"]["cycle"] = true;         // decay_steps 20 at step 15: (1 - 0.75)^2
  EXPECT_DOUBLE_EQ(rate(polynomial, 15), 0.9 * 0.0625 + 0.1);
  EXPECT_DOUBLE_EQ(rate(polynomial, 0), 1.0);

  json inverse =
      schedule("InverseTimeDecay",
               {{"initial_learning_rate", 1.0}, {"decay_steps", 10}, {"decay_rate", 0.5}});
  EXPECT_DOUBLE_EQ(rate(inverse, 20), 0.5);
  inverse["config"]["staircase"] = true;
  EXPECT_DOUBLE_EQ(rate(inverse, 15), 1.0 / 1.5);

  json cosine = schedule("CosineDecay",
                         {{"initial_learning_rate", 1.0}, {"decay_steps", 10}, {"alpha", 0.1}});
  EXPECT_DOUBLE_EQ(rate(cosine, 5), 0.9 * 0.5 + 0.1);
  EXPECT_DOUBLE_EQ(rate(cosine, 20), 0.1);
  // A warm-up from 0 to 2 over 4 steps, then the decay from 2.
  cosine["config"] = {{"initial_learning_rate", 0.0},
                      {"decay_steps", 10},
                      {"alpha", 0.1},
                      {"warmup_target", 2.0},
                      {"warmup_steps", 4}};
  EXPECT_DOUBLE_EQ(rate(cosine, 2), 1.0);
  EXPECT_DOUBLE_EQ(rate(cosine, 4), 2.0);
  EXPECT_DOUBLE_EQ(rate(cosine, 9), 2.0 * (0.9 * 0.5 + 0.1));

  const json restarts = schedule(
      "CosineDecayRestarts",
      {{"initial_learning_rate", 1.0}, {"first_decay_steps", 10}, {"t_mul", 2.0}, {"m_mul", 0.5}});
  EXPECT_DOUBLE_EQ(rate(restarts, 0), 1.0);
  EXPECT_NEAR(rate(restarts, 5), 0.5, 1e-15);
  EXPECT_NEAR(rate(restarts, 10), 0.5, 1e-15);   // the second period starts at half the height
  EXPECT_NEAR(rate(restarts, 20), 0.25, 1e-15);  // halfway through its 20 steps
}

TEST(LearningRateSchedule, AnOptimizersUpdateAfterTUpdatesUsesTheRateAtT) {
  const json config = {
      {"class_name", "SGD"},
      {"config",
       {{"learning_rate",
         schedule("ExponentialDecay",
                  {{"initial_learning_rate", 0.1}, {"decay_steps", 1}, {"decay_rate", 0.5}})}}}};
  auto opt = make_optimizer(config, "optimizer");
  Parameter p{"w", Tensor({1}), Tensor({1})};
  p.value[0] = 1.0f;
  p.grad[0] = 1.0f;
  float expected = 1.0f;
  for (int t = 0; t < 3; ++t) {
    EXPECT_DOUBLE_EQ(opt->learning_rate(), 0.1 * std::pow(0.5, t));  // Keras' property
    opt->apply({&p});
    expected -= static_cast<float>(0.1 * std::pow(0.5, t));
    EXPECT_FLOAT_EQ(p.value[0], expected) << t;
  }
  // Written back in Keras' form, it reads as the same schedule.
  const json written = opt->keras_config()["learning_rate"];
  EXPECT_EQ(written["class_name"], "ExponentialDecay");
  EXPECT_EQ(written["module"], "keras.optimizers.schedules");
  EXPECT_DOUBLE_EQ(rate(written, 7), 0.1 * std::pow(0.5, 7));
  // Keras refuses to set a rate that follows a schedule; so does Tandem, naming it.
  try {
    opt->set_learning_rate(0.01);
    ADD_FAILURE() << "set";
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("follows the optimizer's ExponentialDecay schedule"),
              std::string::npos)
        << e.what();
  }
}

TEST(LearningRateSchedule, BadSchedulesAreRefusedAtTheirKey) {
  const auto path_of = [](const json& lr) -> std::string {
    try {
      make_optimizer({{"class_name", "Adam"}, {"config", {{"learning_rate", lr}}}}, "optimizer");
    } catch (const ConfigError& e) {
      return e.path();
    }
    return "accepted";
  };
  const std::string at = "optimizer.config.learning_rate";
  EXPECT_EQ(path_of(schedule("StepDecay", json::object())), at + ".class_name");
  EXPECT_EQ(path_of(schedule("ExponentialDecay", {{"decay_steps", 1}, {"decay_rate", 0.5}})),
            at + ".config.initial_learning_rate");
  EXPECT_EQ(
      path_of(schedule("ExponentialDecay",
                       {{"initial_learning_rate", 0.1}, {"decay_steps", 0}, {"decay_rate", 0.5}})),
      at + ".config.decay_steps");
  EXPECT_EQ(path_of(schedule("ExponentialDecay", {{"initial_learning_rate", 0.1},
                                                  {"decay_steps", 1},
                                                  {"decay_rate", 0.5},
                                                  {"stairs", true}})),
            at + ".config.stairs");
  EXPECT_EQ(
      path_of(schedule("PiecewiseConstantDecay", {{"boundaries", {10, 5}}, {"values", {1, 2, 3}}})),
      at + ".config.boundaries[1]");
  EXPECT_EQ(path_of(schedule("PiecewiseConstantDecay", {{"boundaries", {10}}, {"values", {1}}})),
            at + ".config.values");
  EXPECT_EQ(path_of(schedule("CosineDecay", {{"initial_learning_rate", 0.0}, {"decay_steps", 5}})),
            at + ".config.initial_learning_rate");
  EXPECT_EQ(path_of(schedule(
                "CosineDecay",
                {{"initial_learning_rate", 0.1}, {"decay_steps", 5}, {"warmup_target", -1}})),
            at + ".config.warmup_target");
  EXPECT_EQ(
      path_of(schedule("CosineDecayRestarts",
                       {{"initial_learning_rate", 0.1}, {"first_decay_steps", 5}, {"alpha", 2}})),
      at + ".config.alpha");
  EXPECT_EQ(path_of(json::object()), at + ".class_name");
  // Keras 2's decay beside a schedule: two decays, refused.
  try {
    make_optimizer(
        {{"class_name", "SGD"},
         {"config",
          {{"learning_rate",
            schedule("ExponentialDecay",
                     {{"initial_learning_rate", 0.1}, {"decay_steps", 1}, {"decay_rate", 0.5}})},
           {"decay", 0.01}}}},
        "optimizer");
    ADD_FAILURE() << "decay and a schedule accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "optimizer.config.decay");
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
