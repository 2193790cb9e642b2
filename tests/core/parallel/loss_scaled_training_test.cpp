// Keras' LossScaleOptimizer through the meta-model: a power-of-two scale changes no bit of a
// float32 run on any number of replicas, and a scale that overflows the gradients skips the
// step (weights, optimizer state and iterations untouched) until halving brings them back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "meta_test_models.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using meta_test::Fixture;
using nlohmann::json;

json loss_scaled_adam(double initial_scale, int growth_steps) {
  return {{"class_name", "LossScaleOptimizer"},
          {"config",
           {{"inner_optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
            {"initial_scale", initial_scale},
            {"dynamic_growth_steps", growth_steps}}}};
}

// The scale doubles every 4 steps (2^15 → 2^17 over 10), every product stays exact: the same
// bits as the plain run, Dropout and 3 replicas included.
TEST(LossScaledTraining, Float32TrainsToTheSameBitsAsWithoutIt) {
  for (int replicas : {1, 3}) {
    Fixture plain, scaled;
    scaled.opt = make_optimizer(loss_scaled_adam(32768.0, 4), "optimizer");
    ReplicaModel a(*plain.model, *plain.opt, DevicePlan::cpus(replicas));
    ReplicaModel b(*scaled.model, *scaled.opt, DevicePlan::cpus(replicas));
    meta_test::train_meta(plain, a, 24, 10);
    meta_test::train_meta(scaled, b, 24, 10);
    EXPECT_TRUE(meta_test::bitwise_equal(b.template_model(), a.template_model()))
        << replicas << " replicas";
    EXPECT_EQ(scaled.opt->loss_scale()->scale(), 131072.0);
    EXPECT_EQ(scaled.opt->loss_scale()->good_steps(), 2);
    EXPECT_EQ(scaled.opt->iterations(), 10);
  }
}

// No Dropout here: a skipped step still runs its forward pass, which would move a random layer's
// stream on and make the first applied step draw other masks than a plain first step.
json dense_model() {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "Dense"},
               {"config", {{"units", 12}, {"activation", "relu"}, {"input_shape", {6}}}}},
              {{"class_name", "Dense"}, {"config", {{"units", 5}}}}}}}}};
}

// Targets of 1000 under mean squared error: the loss gradient is about 2·1000/24 per value,
// times 2^127 far beyond the largest float.
Batch far_targets() {
  Batch b = meta_test::make_batch(24, 7);
  b.y = Tensor({24, 5});
  b.y.fill(1000.0f);
  return b;
}

std::vector<Tensor> weights_of(Model& m) {
  std::vector<Tensor> out;
  for (Parameter* p : m.parameters()) out.push_back(p->value.clone());
  return out;
}

bool same_bits(Model& m, const std::vector<Tensor>& w) {
  auto params = m.parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    if (std::memcmp(params[i]->value.data(), w[i].data(),
                    static_cast<std::size_t>(w[i].size()) * sizeof(float)) != 0)
      return false;
  return true;
}

TEST(LossScaledTraining, OverflowingGradientsSkipTheStepAndHalveTheScaleUntilTheyFit) {
  for (int replicas : {1, 2}) {
    Fixture scaled(dense_model());
    scaled.metrics.clear();
    scaled.loss = make_loss(json("mse"), "loss");
    scaled.opt = make_optimizer(loss_scaled_adam(std::ldexp(1.0, 126), 2000), "optimizer");
    ReplicaModel meta(*scaled.model, *scaled.opt, DevicePlan::cpus(replicas));
    const Batch batch = far_targets();
    const LossScale& scale = *scaled.opt->loss_scale();
    int skipped = 0;
    for (; skipped < 60; ++skipped) {
      const auto before = weights_of(meta.template_model());
      const double scale_before = scale.scale();
      meta.forward_backward(batch, *scaled.loss, scaled.metrics);
      meta.apply_update();
      if (scale.skipped_steps() == skipped) break;  // applied
      EXPECT_TRUE(same_bits(meta.template_model(), before)) << "skipped step " << skipped;
      EXPECT_EQ(scale.scale(), scale_before / 2);
      EXPECT_EQ(scaled.opt->iterations(), 0);
    }
    EXPECT_GE(skipped, 1);  // the first step had to overflow
    EXPECT_LT(skipped, 60);
    EXPECT_EQ(scale.scale(), std::ldexp(1.0, 126 - skipped));
    EXPECT_EQ(scaled.opt->iterations(), 1);
    EXPECT_EQ(scaled.opt->slots(0).size(), 2u);  // Adam's m and v, made by the applied step

    // The applied step is the plain first step on the same batch, to the bit.
    Fixture plain(dense_model());
    plain.metrics.clear();
    plain.loss = make_loss(json("mse"), "loss");
    ReplicaModel reference(*plain.model, *plain.opt, DevicePlan::cpus(replicas));
    reference.forward_backward(batch, *plain.loss, plain.metrics);
    reference.apply_update();
    EXPECT_TRUE(meta_test::bitwise_equal(meta.template_model(), reference.template_model()))
        << replicas << " replicas, " << skipped << " steps skipped";
  }
}

}  // namespace
}  // namespace tandem
