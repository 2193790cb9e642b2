// Keras' weight regularizers: the loss a step reports carries l1·Σ|w| + l2·Σw² once, however
// the batch is split over replicas; the step moves each weight by the penalty's gradient
// l1·sign(w) + 2·l2·w besides the data's (checked against the same model unregularized, by
// hand); configs round-trip and bad ones are refused at their path.
#include "nn/regularizer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "parallel/replica_model.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json model_config(const json& kernel_regularizer, const json& bias_regularizer) {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "Dense"},
               {"config",
                {{"units", 3},
                 {"input_shape", {4}},
                 {"kernel_regularizer", kernel_regularizer},
                 {"bias_regularizer", bias_regularizer},
                 {"bias_initializer",
                  {{"class_name", "RandomUniform"}, {"config", {{"seed", 5}}}}}}}}}}}}};
}

Batch batch() {
  Batch b;
  b.x = Tensor({6, 4});
  b.y = Tensor({6, 3});
  for (std::int64_t i = 0; i < b.x.size(); ++i) b.x[i] = std::sin(0.9f * static_cast<float>(i));
  for (std::int64_t i = 0; i < b.y.size(); ++i) b.y[i] = std::cos(0.4f * static_cast<float>(i));
  return b;
}

const json kL2 = {{"class_name", "L2"}, {"config", {{"l2", 0.1}}}};
const json kL1 = {{"class_name", "L1"}, {"config", {{"l1", 0.05}}}};

// l1·Σ|w| + l2·Σw² of the model's kernel (L2 0.1) and bias (L1 0.05), by hand.
double hand_penalty(Model& m) {
  double p = 0;
  const Tensor& k = m.layer(0).parameters()[0]->value;
  const Tensor& b = m.layer(0).parameters()[1]->value;
  for (std::int64_t i = 0; i < k.size(); ++i) p += 0.1f * static_cast<double>(k[i]) * k[i];
  for (std::int64_t i = 0; i < b.size(); ++i) p += 0.05f * std::fabs(static_cast<double>(b[i]));
  return p;
}

TEST(Regularizer, TheLossCarriesThePenaltyOnceOnAnyReplicaCount) {
  auto loss = make_loss("mse", "loss");
  for (int replicas : {1, 3}) {
    auto plain = Model::from_config(model_config(nullptr, nullptr), "model", 2);
    auto regular = Model::from_config(model_config(kL2, kL1), "model", 2);
    auto o1 = make_optimizer("sgd", "o"), o2 = make_optimizer("sgd", "o");
    ReplicaModel a(*plain, *o1, DevicePlan::cpus(replicas)), b(*regular, *o2, DevicePlan::cpus(replicas));
    const StepSums s_plain = a.evaluate(batch(), *loss, {});
    const StepSums s_regular = b.evaluate(batch(), *loss, {});
    const double penalty = hand_penalty(*regular);
    EXPECT_GT(penalty, 0.01);
    EXPECT_NEAR(s_regular.loss.mean(), s_plain.loss.mean() + penalty, 1e-6 * (1 + penalty))
        << replicas << " replicas";
  }
}

// A frozen layer's penalties: Keras 3 leaves them out of the loss (it sums the trainable
// weights' regularization losses), tf.keras 2 counts them. A model config naming keras_version
// 2.x follows Keras 2; any other, Keras 3.
TEST(Regularizer, AFrozenLayersPenaltyCountsInAKeras2ModelsLossAlone) {
  auto loss = make_loss("mse", "loss");
  for (const bool keras2 : {false, true}) {
    json frozen = model_config(kL2, kL1);
    frozen["config"]["layers"][0]["config"]["trainable"] = false;
    json unregularized = model_config(nullptr, nullptr);
    if (keras2) frozen["keras_version"] = unregularized["keras_version"] = "2.15.0";
    auto plain = Model::from_config(unregularized, "model", 2);
    auto regular = Model::from_config(frozen, "model", 2);
    auto o1 = make_optimizer("sgd", "o"), o2 = make_optimizer("sgd", "o");
    ReplicaModel a(*plain, *o1, DevicePlan::cpus(1)), b(*regular, *o2, DevicePlan::cpus(1));
    const double penalty = hand_penalty(*regular);
    const double expected = a.evaluate(batch(), *loss, {}).loss.mean() + (keras2 ? penalty : 0.0);
    EXPECT_NEAR(b.evaluate(batch(), *loss, {}).loss.mean(), expected, 1e-6 * (1 + penalty))
        << (keras2 ? "Keras 2" : "Keras 3");
  }
}

TEST(Regularizer, AStepAddsThePenaltysGradient) {
  auto loss = make_loss("mse", "loss");
  auto plain = Model::from_config(model_config(nullptr, nullptr), "model", 2);
  auto regular = Model::from_config(model_config(kL2, kL1), "model", 2);
  const json sgd = {{"class_name", "SGD"}, {"config", {{"learning_rate", 1.0}}}};
  auto o1 = make_optimizer(sgd, "o"), o2 = make_optimizer(sgd, "o");
  std::vector<Tensor> before;
  for (Parameter* p : regular->parameters()) before.push_back(p->value.clone());
  ReplicaModel a(*plain, *o1, DevicePlan::cpus(2)), b(*regular, *o2, DevicePlan::cpus(2));
  a.forward_backward(batch(), *loss, {});
  a.apply_update();
  b.forward_backward(batch(), *loss, {});
  b.apply_update();
  a.sync_template();
  b.sync_template();
  // w_regular - w_plain = -(l1·sign(w0) + 2·l2·w0), lr 1.
  const auto pp = plain->parameters(), pr = regular->parameters();
  for (std::int64_t i = 0; i < before[0].size(); ++i)
    EXPECT_NEAR(pr[0]->value[i] - pp[0]->value[i], -2 * 0.1f * before[0][i], 1e-6) << i;
  for (std::int64_t i = 0; i < before[1].size(); ++i)
    EXPECT_NEAR(pr[1]->value[i] - pp[1]->value[i], before[1][i] > 0 ? -0.05f : 0.05f, 1e-6) << i;
}

TEST(Regularizer, ConfigsRoundTripAndBadOnesNameTheirPath) {
  auto m = Model::from_config(model_config("l2", {{"class_name", "L1L2"},
                                                  {"config", {{"l1", 0.01}, {"l2", 0.02}}}}),
                              "model", 1);
  const json c = m->layer(0).config();
  EXPECT_EQ(c["kernel_regularizer"], json::parse(R"({"class_name": "L2", "config": {"l2": 0.01}})"));
  EXPECT_EQ(c["bias_regularizer"]["config"]["l2"], 0.02);
  EXPECT_EQ(Model::from_config(m->config(), "model", 1)->layer(0).config(), c);
  // The string "l1_l2" is tf.keras 2's L1L2(0.01, 0.01) (it gave no penalty); "l1l2", Keras 3's
  // snake-case name of the class, is L1L2() with its zero defaults.
  const auto factors_of = [](const char* name) {
    const json c = Model::from_config(model_config(name, nullptr), "model", 1)->layer(0).config();
    return std::make_pair(c["kernel_regularizer"]["config"]["l1"].get<double>(),
                          c["kernel_regularizer"]["config"]["l2"].get<double>());
  };
  EXPECT_EQ(factors_of("l1_l2"), std::make_pair(0.01, 0.01));
  EXPECT_EQ(factors_of("l1l2"), std::make_pair(0.0, 0.0));
  const auto error_of = [](const json& r) {
    try {
      Model::from_config(model_config(r, nullptr), "model", 1);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of({{"class_name", "L3"}})
                .find("'model.config.layers[0].config.kernel_regularizer.class_name': unknown "
                      "regularizer 'L3'"),
            std::string::npos);
  EXPECT_NE(error_of({{"class_name", "L2"}, {"config", {{"l2", -1}}}})
                .find("kernel_regularizer.config.l2': expected a finite factor >= 0"),
            std::string::npos);
  EXPECT_NE(error_of({{"class_name", "L2"}, {"config", {{"l1", 0.1}}}})
                .find("kernel_regularizer.config.l1"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::nn
