#include "nn/batch_normalization.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "gradient_check.hpp"
#include "optim/optimizer.hpp"
#include "parallel/cross_replica_sum.hpp"
#include "parallel/replica_model.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

// From backend/cpu/parallel.hpp, which the tests do not include: they are built without OpenMP and
// its `#pragma omp` would warn.
namespace tandem::cpu {
int compute_threads();
void set_compute_threads(int threads);
}  // namespace tandem::cpu

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using test::expect_close;
using test::numeric_gradient;

constexpr double kEps = 1e-3;

// Reference BatchNormalization in double over rows x channels: with `batch_stats` the batch mean
// and biased variance of each channel — with `kept` (one 0/1 value per row, a Keras mask) those
// of the kept rows, Keras 3's masked moments Σ m·x / Σ m and Σ m·(x - mean)² / Σ m (0 and 0 when
// none is kept) —, else the given moving statistics. L = sum w * y, or with `relu` sum w * max(0,
// y).
double reference_loss(const std::vector<double>& x, const std::vector<double>& gamma,
                      const std::vector<double>& beta, const std::vector<double>& w,
                      std::int64_t rows, std::int64_t channels, bool batch_stats,
                      const std::vector<double>& moving_mean = {},
                      const std::vector<double>& moving_var = {}, bool relu = false,
                      const std::vector<double>& kept = {}) {
  double loss = 0;
  const auto m = [&](std::int64_t r) { return kept.empty() ? 1.0 : kept[r]; };
  for (std::int64_t c = 0; c < channels; ++c) {
    double mean = 0, var = 0;
    if (batch_stats) {
      double count = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        mean += m(r) * x[r * channels + c];
        count += m(r);
      }
      mean = count > 0 ? mean / count : 0.0;
      for (std::int64_t r = 0; r < rows; ++r)
        var += m(r) * (x[r * channels + c] - mean) * (x[r * channels + c] - mean);
      var = count > 0 ? var / count : 0.0;
    } else {
      mean = moving_mean[c];
      var = moving_var[c];
    }
    const double g = gamma.empty() ? 1.0 : gamma[c], b = beta.empty() ? 0.0 : beta[c];
    for (std::int64_t r = 0; r < rows; ++r) {
      const double y = (x[r * channels + c] - mean) / std::sqrt(var + kEps) * g + b;
      loss += w[r * channels + c] * (relu ? std::max(y, 0.0) : y);
    }
  }
  return loss;
}

struct BnCase {
  Shape input;  // per sample; the last axis is the channel axis
  std::int64_t batch;
  bool center, scale;
  bool training;
  bool relu = false;  // the reading layer's relu absorbed
  // A Keras mask of the steps of (steps, channels) inputs: 1 keeps every third step out, 2 keeps
  // none of the first sample's steps.
  int masked = 0;
};

class BatchNormalizationGradientTest : public ::testing::TestWithParam<BnCase> {};

TEST_P(BatchNormalizationGradientTest, ForwardAndGradientsMatchDoubleReference) {
  const BnCase c = GetParam();
  BatchNormalizationOptions o;
  o.center = c.center;
  o.scale = c.scale;
  BatchNormalization bn("bn", o);
  Rng init(3);
  EXPECT_EQ(bn.build(c.input, init), c.input);
  bn.set_absorb_output_relu(c.relu);
  auto params = bn.parameters();
  Parameter* gamma = c.scale ? params[0] : nullptr;
  Parameter* beta = c.center ? params[c.scale ? 1 : 0] : nullptr;
  Parameter* moving_mean = params[params.size() - 2];
  Parameter* moving_var = params[params.size() - 1];
  // Non-trivial affine parameters and moving statistics.
  if (gamma) gamma->value = test::random_tensor(gamma->value.shape(), 11, 0.5f, 2.0f);
  if (beta) beta->value = test::random_tensor(beta->value.shape(), 12);
  moving_mean->value.copy_from(test::random_tensor(moving_mean->value.shape(), 13));
  moving_var->value.copy_from(test::random_tensor(moving_var->value.shape(), 14, 0.3f, 2.0f));
  const auto mm = test::to_double(moving_mean->value), mv = test::to_double(moving_var->value);

  Shape x_shape{c.batch};
  x_shape.insert(x_shape.end(), c.input.begin(), c.input.end());
  Tensor x = test::random_tensor(x_shape, 21, -1.5f, 2.5f);
  Tensor mask({c.batch, c.input.front()});
  std::vector<double> kept;
  if (c.masked) {
    for (std::int64_t r = 0; r < mask.size(); ++r)
      mask[r] = (c.masked == 1 ? r % 3 == 1 : r < c.input.front()) ? 0.0f : 1.0f;
    kept = test::to_double(mask);
    EXPECT_TRUE(bn.output_masked(true));
    bn.set_input_mask(&mask);
    EXPECT_EQ(bn.output_mask(), &mask);  // passed on
  }
  const Tensor& y = bn.forward(x, c.training);
  ASSERT_EQ(y.shape(), x.shape());
  const std::int64_t channels = c.input.back(), rows = x.size() / channels;
  Tensor w = test::random_tensor(y.shape(), 22);
  auto xd = test::to_double(x), wd = test::to_double(w);
  auto gd = gamma ? test::to_double(gamma->value) : std::vector<double>{};
  auto bd = beta ? test::to_double(beta->value) : std::vector<double>{};
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& gv,
                  const std::vector<double>& bv) {
    return reference_loss(xv, gv, bv, wd, rows, channels, c.training, mm, mv, c.relu, kept);
  };

  double tandem_loss = 0;
  int clipped = 0;
  for (std::int64_t i = 0; i < y.size(); ++i) {
    tandem_loss += static_cast<double>(y[i]) * w[i];
    clipped += y[i] == 0.0f;
  }
  if (c.relu) {
    EXPECT_GT(clipped, 0) << "the relu cuts nothing: the case checks no mask";
  }
  EXPECT_NEAR(tandem_loss, loss(xd, gd, bd), 1e-4 * (1 + std::fabs(tandem_loss)));

  const Tensor& gx = bn.backward(w, true);
  ASSERT_EQ(gx.shape(), x.shape());
  expect_close(test::to_double(gx),
               numeric_gradient([&](const auto& v) { return loss(v, gd, bd); }, xd), 1e-3, 1e-4,
               "d/dx");
  if (gamma)
    expect_close(test::to_double(gamma->grad),
                 numeric_gradient([&](const auto& v) { return loss(xd, v, bd); }, gd), 1e-3, 1e-4,
                 "d/dgamma");
  if (beta)
    expect_close(test::to_double(beta->grad),
                 numeric_gradient([&](const auto& v) { return loss(xd, gd, v); }, bd), 1e-3, 1e-4,
                 "d/dbeta");
}

INSTANTIATE_TEST_SUITE_P(
    Variants, BatchNormalizationGradientTest,
    ::testing::Values(BnCase{{4}, 8, true, true, true},     // training: through batch stats
                      BnCase{{3, 5}, 3, true, true, true},  // rank 3: stats over batch and axis 1
                      BnCase{{2, 2, 3}, 2, true, true, true},  // rank 4 (image-like)
                      BnCase{{6}, 5, false, true, true},       // no beta
                      BnCase{{6}, 5, true, false, true},       // no gamma
                      BnCase{{6}, 5, false, false, true},      // neither
                      BnCase{{4}, 6, true, true, false},       // inference: an affine map
                      BnCase{{2, 3}, 4, false, true, false},
                      BnCase{{2, 2, 3}, 3, true, true, true, true},  // relu absorbed
                      BnCase{{5}, 6, true, true, false, true},
                      // channels past the backend's 16-lane sums: one block of 16 and 3 more
                      BnCase{{2, 19}, 4, true, true, true},
                      BnCase{{2, 2, 35}, 3, true, true, true, true},  // two blocks, relu
                      // a Keras mask: the statistics of the kept steps; in inference none
                      BnCase{{5, 3}, 3, true, true, true, false, 1},
                      BnCase{{4, 19}, 3, true, true, true, true, 1},
                      BnCase{{4, 3}, 2, false, true, true, false, 2},
                      BnCase{{5, 3}, 3, true, true, false, false, 1}),
    [](const auto& info) {
      const BnCase& c = info.param;
      std::string name = c.training ? "training" : "inference";
      name += "_rank" + std::to_string(c.input.size() + 1) + "_batch" + std::to_string(c.batch);
      name += "_channels" + std::to_string(c.input.back());
      if (!c.center) name += "_nobeta";
      if (!c.scale) name += "_nogamma";
      if (c.relu) name += "_relu";
      if (c.masked) name += c.masked == 1 ? "_masked" : "_masked_sample";
      return name;
    });

TEST(BatchNormalization, KerasWeightOrderNamesAndDefaults) {
  BatchNormalization bn("batch_normalization", {});
  Rng init(1);
  bn.build({2, 5}, init);
  auto p = bn.parameters();
  ASSERT_EQ(p.size(), 4u);
  const char* names[] = {"gamma", "beta", "moving_mean", "moving_variance"};
  const float initial[] = {1.0f, 0.0f, 0.0f, 1.0f};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(p[i]->name, names[i]);
    EXPECT_EQ(p[i]->value.shape(), (Shape{5}));
    EXPECT_EQ(p[i]->trainable, i < 2) << names[i];
    EXPECT_EQ(p[i]->grad.empty(), i >= 2) << names[i];  // no grad when not trainable
    for (float v : p[i]->value.values()) EXPECT_EQ(v, initial[i]) << names[i];
  }
  BatchNormalizationOptions no_center;
  no_center.center = false;
  BatchNormalization bn2("bn", no_center);
  bn2.build({3}, init);
  auto q = bn2.parameters();
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0]->name, "gamma");
  EXPECT_EQ(q[1]->name, "moving_mean");
  const json cfg = bn.config();
  EXPECT_EQ(cfg["axis"], -1);
  EXPECT_EQ(cfg["momentum"], 0.99);
  EXPECT_EQ(cfg["epsilon"], 0.001);
  EXPECT_EQ(cfg["gamma_initializer"]["class_name"], "Ones");
  EXPECT_EQ(cfg["moving_variance_initializer"]["class_name"], "Ones");
  EXPECT_EQ(cfg["synchronized"], false);
}

// Hand-computed, with a Keras mask of the steps: the statistics of the kept steps alone, every
// step normalized with them, the moving statistics moved by them; a batch keeping no step gives
// mean 0 and variance 0 (Keras 3's Σ m·x / (Σ m + ε)). Masked inputs with more axes are refused.
TEST(BatchNormalization, AMaskKeepsThePaddedStepsOutOfTheStatistics) {
  BatchNormalizationOptions o;
  o.momentum = 0.9;
  BatchNormalization bn("bn", o);
  Rng init(1);
  bn.build({3, 1}, init);
  auto p = bn.parameters();
  Parameter &mm = *p[2], &mv = *p[3];
  // Kept: 1, 3 and 5 — mean 3, biased variance (4 + 0 + 4) / 3; 100 and -50 and 7 are padding.
  Tensor mask = Tensor::from_vector({2, 3}, {1, 0, 1, 1, 0, 0});
  bn.set_input_mask(&mask);
  const Tensor& y = bn.forward(Tensor::from_vector({2, 3, 1}, {1, 100, 3, 5, -50, 7}), true);
  const double sd = std::sqrt(8.0 / 3 + kEps);
  const std::vector<double> expected{-2 / sd, 97 / sd, 0, 2 / sd, -53 / sd, 4 / sd};
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-5) << i;
  EXPECT_NEAR(mm.value[0], 0.3, 1e-6);
  EXPECT_NEAR(mv.value[0], 0.9 + 0.1 * 8.0 / 3, 1e-6);
  EXPECT_EQ(bn.output_mask(), &mask);
  // The statistics' gradient reaches the kept steps alone: a padded step's gradient is its own
  // dy / sd. Moving every kept step by δ moves the mean by δ: the kept outputs stay, the padded
  // ones fall by δ / sd, so the kept steps' gradients sum to -(2 + 4 + 5) / sd.
  const Tensor& dx = bn.backward(Tensor::from_vector({2, 3, 1}, {1, 2, -1, 3, 4, 5}), true);
  EXPECT_NEAR(dx[1], 2 / sd, 1e-5);
  EXPECT_NEAR(dx[4], 4 / sd, 1e-5);
  EXPECT_NEAR(dx[5], 5 / sd, 1e-5);
  EXPECT_NEAR(dx[0] + dx[2] + dx[3], -11 / sd, 1e-5);
  // Nothing kept: mean 0 and variance 0.
  mask.fill(0.0f);
  const Tensor& z = bn.forward(Tensor::from_vector({2, 3, 1}, {1, 2, 3, 4, 5, 6}), true);
  EXPECT_NEAR(z[5], 6 / std::sqrt(kEps), 1e-3);
  EXPECT_NEAR(mm.value[0], 0.27, 1e-6);
  EXPECT_NEAR(mv.value[0], 0.9 * (0.9 + 0.1 * 8.0 / 3), 1e-6);

  BatchNormalization images("images", {});
  images.build({4, 4, 3}, init);
  EXPECT_FALSE(images.output_masked(false));
  try {
    images.output_masked(true);
    FAIL() << "a masked (4, 4, 3) input was accepted";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(),
                 "layer 'images' (BatchNormalization) receives a mask of the steps of inputs "
                 "(None, 4, 4, 3); Keras applies a mask to sequences (batch, steps, features) "
                 "alone");
  }
}

// Hand-computed: two training steps with momentum 0.9, then inference with the moving statistics.
TEST(BatchNormalization, TrainingUsesBatchStatsAndMovesTheAveragesInferenceUsesThem) {
  BatchNormalizationOptions o;
  o.momentum = 0.9;
  BatchNormalization bn("bn", o);
  Rng init(1);
  bn.build({2}, init);
  auto p = bn.parameters();
  Parameter &gamma = *p[0], &beta = *p[1], &mm = *p[2], &mv = *p[3];
  gamma.value = Tensor::from_vector({2}, {2.0f, 1.0f});
  beta.value = Tensor::from_vector({2}, {0.5f, 0.0f});

  // Step 1: channel 0 = {1, 3}: mean 2, biased variance 1 (unbiased would be 2);
  //         channel 1 = {2, 6}: mean 4, biased variance 4.
  const Tensor& y1 = bn.forward(Tensor::from_vector({2, 2}, {1, 2, 3, 6}), true);
  EXPECT_NEAR(y1[0], (1 - 2) / std::sqrt(1 + kEps) * 2 + 0.5, 1e-6);
  EXPECT_NEAR(y1[1], (2 - 4) / std::sqrt(4 + kEps), 1e-6);
  EXPECT_NEAR(y1[2], (3 - 2) / std::sqrt(1 + kEps) * 2 + 0.5, 1e-6);
  // moving = moving * 0.9 + batch * 0.1, from (0, 0) and (1, 1).
  EXPECT_NEAR(mm.value[0], 0.2, 1e-7);
  EXPECT_NEAR(mm.value[1], 0.4, 1e-7);
  EXPECT_NEAR(mv.value[0], 1.0, 1e-7);  // 0.9 + 0.1 * 1 (the biased variance, as Keras)
  EXPECT_NEAR(mv.value[1], 1.3, 1e-7);  // 0.9 + 0.1 * 4

  // Step 2: channel 0 = {0, 4}: mean 2, variance 4; channel 1 = {0, 2}: mean 1, variance 1.
  bn.forward(Tensor::from_vector({2, 2}, {0, 0, 4, 2}), true);
  EXPECT_NEAR(mm.value[0], 0.38, 1e-6);  // 0.2 * 0.9 + 2 * 0.1
  EXPECT_NEAR(mm.value[1], 0.46, 1e-6);  // 0.4 * 0.9 + 1 * 0.1
  EXPECT_NEAR(mv.value[0], 1.30, 1e-6);  // 1.0 * 0.9 + 4 * 0.1
  EXPECT_NEAR(mv.value[1], 1.27, 1e-6);  // 1.3 * 0.9 + 1 * 0.1

  // Inference normalises with the moving statistics and leaves them alone.
  const Tensor& y = bn.forward(Tensor::from_vector({1, 2}, {1, 1}), false);
  EXPECT_NEAR(y[0], (1 - 0.38) / std::sqrt(1.30 + kEps) * 2 + 0.5, 1e-5);
  EXPECT_NEAR(y[1], (1 - 0.46) / std::sqrt(1.27 + kEps), 1e-5);
  EXPECT_NEAR(mm.value[0], 0.38, 1e-6);
  EXPECT_NEAR(mv.value[1], 1.27, 1e-6);

  // A frozen layer (trainable=false) runs in inference mode even when training, as in Keras 3.
  bn.set_trainable(false);
  const Tensor& frozen = bn.forward(Tensor::from_vector({1, 2}, {1, 1}), true);
  EXPECT_NEAR(frozen[0], (1 - 0.38) / std::sqrt(1.30 + kEps) * 2 + 0.5, 1e-5);
  EXPECT_NEAR(mm.value[0], 0.38, 1e-6);
}

TEST(BatchNormalization, BatchOfOneNormalisesToBetaAndEmptyBatchIsANoOp) {
  BatchNormalizationOptions o;
  o.momentum = 0.9;
  BatchNormalization bn("bn", o);
  Rng init(1);
  bn.build({3}, init);
  auto p = bn.parameters();
  p[1]->value = Tensor::from_vector({3}, {0.1f, 0.2f, 0.3f});
  const Tensor& y = bn.forward(Tensor::from_vector({1, 3}, {5, -7, 9}), true);
  for (int c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(y[c], p[1]->value[c]);   // variance 0 -> beta
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(p[3]->value[c], 0.9, 1e-7);  // 1 * 0.9 + 0 * 0.1
  EXPECT_NEAR(p[2]->value[1], -0.7, 1e-6);
  const Tensor& gx = bn.backward(Tensor::from_vector({1, 3}, {1, 2, 3}), true);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(gx[c], 0.0f);
    EXPECT_EQ(p[0]->grad[c], 0.0f);
    EXPECT_EQ(p[1]->grad[c], static_cast<float>(c + 1));
  }
  // A replica may get an empty shard (fewer samples than replicas): nothing moves.
  const Tensor before = p[2]->value.clone();
  const Tensor& empty = bn.forward(Tensor({0, 3}), true);
  EXPECT_EQ(empty.shape(), (Shape{0, 3}));
  const Tensor& g0 = bn.backward(Tensor({0, 3}), true);
  EXPECT_EQ(g0.shape(), (Shape{0, 3}));
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(p[2]->value[c], before[c]);
    EXPECT_EQ(p[0]->grad[c], 0.0f);
    EXPECT_EQ(p[1]->grad[c], 0.0f);
  }
}

// A GPU replica without rows runs no kernels, yet its BatchNormalization must meet the other
// replicas' average of the moving statistics, or their forwards wait for it forever
// (forward_without_rows): both replicas end with what a forward of an empty shard gives them —
// the moved statistics of the replica with rows.
TEST(BatchNormalization, AReplicaWithoutRowsMeetsTheMovingStatisticsAverage) {
  auto train_two = [](bool without_rows) {
    BatchNormalizationOptions o;
    o.momentum = 0.9;
    auto sum = std::make_shared<CrossReplicaSum>(2, nullptr);
    std::vector<std::unique_ptr<BatchNormalization>> replicas;
    for (int r = 0; r < 2; ++r) {
      replicas.push_back(std::make_unique<BatchNormalization>("bn", o));
      Rng init(1);
      replicas.back()->build({2}, init);
      replicas.back()->set_cross_replica_sum(
          [sum, r](double* values, std::size_t n) { sum->sum(r, values, n); });
    }
    std::thread empty([&] {
      if (without_rows)
        replicas[1]->forward_without_rows();
      else
        replicas[1]->forward(Tensor({0, 2}), true);
    });
    replicas[0]->forward(Tensor::from_vector({2, 2}, {1, 2, 3, 6}), true);
    empty.join();
    std::vector<float> moving;
    for (auto& bn : replicas)
      for (Parameter* p : bn->moving_state())
        for (std::int64_t k = 0; k < p->value.size(); ++k) moving.push_back(p->value[k]);
    return moving;
  };
  const std::vector<float> met = train_two(true);
  EXPECT_EQ(met, train_two(false));
  // Replica 0's shard moved them (the single-layer test's step 1), replica 1 took its values.
  const std::vector<float> expected = {0.2f, 0.4f, 1.0f, 1.3f};
  for (std::size_t k = 0; k < met.size(); ++k) EXPECT_NEAR(met[k], expected[k % 4], 1e-6) << k;
}

TEST(BatchNormalization, ResultsDoNotDependOnTheThreadCount) {
  const int saved = cpu::compute_threads();
  auto run = [](int threads) {
    cpu::set_compute_threads(threads);
    BatchNormalization bn("bn", {});
    Rng init(1);
    bn.build({5}, init);
    Tensor x = test::random_tensor({30000, 5}, 8, -3, 5);  // several reduction blocks
    const Tensor& y = bn.forward(x, true);
    std::vector<float> out(y.values().begin(), y.values().end());
    const Tensor& gx = bn.backward(test::random_tensor({30000, 5}, 9), true);
    out.insert(out.end(), gx.values().begin(), gx.values().end());
    for (Parameter* p : bn.parameters())
      for (float v : (p->trainable ? p->grad : p->value).values()) out.push_back(v);
    return out;
  };
  const auto one = run(1), two = run(2), three = run(3);
  cpu::set_compute_threads(saved);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);
}

TEST(BatchNormalization, WrongInputOrAxisNamesTheLayer) {
  BatchNormalization bn("norm", {});
  Rng init(1);
  bn.build({4}, init);
  try {
    bn.forward(Tensor({2, 5}), true);
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("'norm'"), std::string::npos) << e.what();
  }
  BatchNormalizationOptions o;
  o.axis = 1;  // of (None, 4, 8): not the last axis
  BatchNormalization first_axis("norm2", o);
  EXPECT_THROW(first_axis.build({4, 8}, init), ShapeError);
  o.axis = 2;  // tf.keras' positive spelling of the last axis
  BatchNormalization last_axis("norm3", o);
  EXPECT_EQ(last_axis.build({4, 8}, init), (Shape{4, 8}));
}

// ----- Through the Model: optimizer, checkpoints, config --------------------------------------

json layer(const std::string& cls, json cfg) {
  return {{"class_name", cls}, {"config", cfg}};
}
json sequential(std::vector<json> layers) {
  return {{"class_name", "Sequential"}, {"config", {{"layers", layers}}}};
}
std::string config_error(const json& model) {
  return test::model_config_error(model);
}

TEST(BatchNormalizationModel, OptimizerSkipsMovingStatsCheckpointsKeepThem) {
  auto model = Model::from_config(sequential({layer("Dense", {{"units", 3}, {"input_shape", {4}}}),
                                              layer("BatchNormalization", {{"momentum", 0.5}})}),
                                  "model", 7);
  EXPECT_EQ(model->parameter_names(),
            (std::vector<std::string>{"dense/kernel", "dense/bias", "batch_normalization/gamma",
                                      "batch_normalization/beta", "batch_normalization/moving_mean",
                                      "batch_normalization/moving_variance"}));
  auto all = model->parameters(), trainable = model->trainable_parameters();
  ASSERT_EQ(all.size(), 6u);
  ASSERT_EQ(trainable.size(), 4u);
  for (Parameter* p : trainable) EXPECT_EQ(p->name.find("moving"), std::string::npos) << p->name;
  EXPECT_EQ(model->count_params(), 4 * 3 + 3 + 4 * 3);
  EXPECT_EQ(model->count_trainable_params(), 4 * 3 + 3 + 2 * 3);

  Tensor x = test::random_tensor({6, 4}, 5);
  model->forward(x, true);
  const Tensor moved_mean = all[4]->value.clone(), moved_var = all[5]->value.clone();
  const Tensor gamma_before = all[2]->value.clone();
  bool moved = false;
  for (int c = 0; c < 3; ++c) moved |= moved_mean[c] != 0.0f || moved_var[c] != 1.0f;
  EXPECT_TRUE(moved);
  model->backward(test::random_tensor({6, 3}, 6));
  auto sgd = make_optimizer(json{{"class_name", "SGD"}, {"config", {{"learning_rate", 0.5}}}}, "o");
  sgd->apply(model->trainable_parameters());
  bool gamma_changed = false;
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(all[4]->value[c], moved_mean[c]);  // the optimizer left them alone
    EXPECT_EQ(all[5]->value[c], moved_var[c]);
    gamma_changed |= all[2]->value[c] != gamma_before[c];
  }
  EXPECT_TRUE(gamma_changed);

  // Saved like any weight, in Keras order, and restored by load_weights (through a file).
  CheckpointData data;
  model->save_weights(data);
  ASSERT_EQ(data.layers.size(), 2u);
  ASSERT_EQ(data.layers[1].weights.size(), 4u);
  EXPECT_EQ(data.layers[1].weights[2].name, "moving_mean");
  EXPECT_EQ(data.layers[1].weights[3].name, "moving_variance");
  const auto file = test::scratch_dir("bn_checkpoint") / "w.h5";
  write_checkpoint_file(file, data);
  auto fresh = Model::from_config(model->config(), "model", 99);
  fresh->load_weights(read_checkpoint_file(file), file.string());
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(fresh->parameters()[4]->value[c], moved_mean[c]);
    EXPECT_EQ(fresh->parameters()[5]->value[c], moved_var[c]);
  }
}

// Each replica normalises with its own shard; the moving statistics each one moved are then
// averaged over the replicas (weighted by their rows), so every replica and the template hold the
// same: the whole batch's mean and the shards' pooled variance (hand-computed below).
TEST(BatchNormalizationModel, ReplicasNormaliseTheirShardsAndShareTheAveragedMovingStatistics) {
  auto model = Model::from_config(
      sequential({layer("BatchNormalization", {{"momentum", 0.0}, {"input_shape", {2}}})}), "model",
      1);
  auto opt = make_optimizer(json{{"class_name", "SGD"}, {"config", {{"learning_rate", 0.1}}}}, "o");
  auto loss = make_loss("mse", "loss");
  ReplicaModel meta(*model, *opt, DevicePlan::cpus(2));
  Batch b;
  b.x = Tensor::from_vector({4, 2}, {1, 10, 3, 20, 5, 30, 9, 40});
  b.y = Tensor({4, 2});
  meta.forward_backward(b, *loss, {});
  meta.apply_update();
  // momentum 0: the moving statistics are the step's. Shards: rows {0, 1} and {2, 3}.
  auto t = meta.template_model().parameters();
  EXPECT_FLOAT_EQ(t[2]->value[0], 4.5f);   // (mean{1, 3} + mean{5, 9}) / 2 = (2 + 7) / 2
  EXPECT_FLOAT_EQ(t[2]->value[1], 25.0f);  // (15 + 35) / 2
  EXPECT_FLOAT_EQ(t[3]->value[0], 2.5f);   // (var{1, 3} + var{5, 9}) / 2 = (1 + 4) / 2
  EXPECT_FLOAT_EQ(t[3]->value[1], 25.0f);  // (25 + 25) / 2
  auto r1 = meta.replica(1).parameters();
  for (int p = 0; p < 4; ++p)
    for (int c = 0; c < 2; ++c) EXPECT_EQ(t[p]->value[c], r1[p]->value[c]) << p << "/" << c;
}

// BatchNormalization -> Activation(relu) runs as one layer (the relu absorbed); the same model
// exporting the normalization's output too keeps them apart (an output keeps what it computes).
// Same weights, same batch: the same outputs, moving statistics and gradients, to the bit, in
// training and in inference.
json conv_bn_relu_model(bool export_bn) {
  auto node = [](const char* from) {
    return json::array({json::array({json::array({from, 0, 0, json::object()})})});
  };
  auto functional_layer = [](const std::string& cls, json cfg, json inbound) {
    const std::string name = cfg["name"];
    return json{{"class_name", cls}, {"config", cfg}, {"name", name}, {"inbound_nodes", inbound}};
  };
  json layers = json::array();
  layers.push_back(functional_layer(
      "InputLayer", {{"name", "in"}, {"batch_shape", {nullptr, 5, 4, 3}}}, json::array()));
  layers.push_back(functional_layer(
      "Conv2D", {{"name", "conv"}, {"filters", 6}, {"kernel_size", {3, 3}}, {"padding", "same"}},
      node("in")));
  layers.push_back(
      functional_layer("BatchNormalization", {{"name", "bn"}, {"momentum", 0.5}}, node("conv")));
  layers.push_back(
      functional_layer("Activation", {{"name", "relu"}, {"activation", "relu"}}, node("bn")));
  layers.push_back(functional_layer("Flatten", {{"name", "flat"}}, node("relu")));
  layers.push_back(functional_layer("Dense", {{"name", "out"}, {"units", 3}}, node("flat")));
  json outputs = json::array({json::array({"out", 0, 0})});
  if (export_bn) outputs.push_back(json::array({"bn", 0, 0}));
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "m"},
            {"layers", layers},
            {"input_layers", json::array({json::array({"in", 0, 0})})},
            {"output_layers", outputs}}}};
}

TEST(BatchNormalizationModel, ReluAbsorbedIntoTheNormalizationGivesTheSameBits) {
  auto fused = Model::from_config(conv_bn_relu_model(false), "model", 5);
  auto plain = Model::from_config(conv_bn_relu_model(true), "model", 5);
  const auto bn_of = [](Model& m) -> BatchNormalization& {
    return dynamic_cast<BatchNormalization&>(m.layer(1));
  };
  ASSERT_EQ(fused->layer(1).name(), "bn");
  EXPECT_TRUE(bn_of(*fused).absorbs_output_relu());
  EXPECT_FALSE(bn_of(*plain).absorbs_output_relu());  // its output is the model's too
  auto fp = fused->parameters(), pp = plain->parameters();
  ASSERT_EQ(fp.size(), pp.size());
  for (std::size_t i = 0; i < fp.size(); ++i) pp[i]->value.copy_from(fp[i]->value);
  // Shifted inputs: beta 0 and mean-free outputs would cut about half; a non-zero beta too.
  fp[3]->value.copy_from(test::random_tensor(fp[3]->value.shape(), 8, -0.5f, 0.5f));
  pp[3]->value.copy_from(fp[3]->value);

  const Tensor x = test::random_tensor({4, 5, 4, 3}, 17);
  const Tensor g = test::random_tensor({4, 3}, 18);
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    const Tensor yf = fused->forward_outputs(x, training)[0]->clone();
    const auto& plain_outputs = plain->forward_outputs(x, training);
    const Tensor yp = plain_outputs[0]->clone();
    Tensor zeros(plain_outputs[1]->shape());
    zeros.fill(0.0f);
    int cut = 0;
    for (float v : plain_outputs[1]->values()) cut += v <= 0.0f;
    EXPECT_GT(cut, 0) << "the relu cuts nothing: the mask goes unchecked";
    for (std::int64_t i = 0; i < yf.size(); ++i) ASSERT_EQ(yf[i], yp[i]) << i;
    fused->backward_outputs({&g}, [](std::size_t) {});
    plain->backward_outputs({&g, &zeros}, [](std::size_t) {});
    double norm = 0;
    for (std::size_t i = 0; i < fp.size(); ++i) {
      for (std::int64_t k = 0; k < fp[i]->value.size(); ++k)
        ASSERT_EQ(fp[i]->value[k], pp[i]->value[k]) << fp[i]->name << "[" << k << "]";
      if (!fp[i]->trainable) continue;
      for (std::int64_t k = 0; k < fp[i]->grad.size(); ++k) {
        ASSERT_EQ(fp[i]->grad[k], pp[i]->grad[k]) << fp[i]->name << " gradient [" << k << "]";
        norm += std::fabs(fp[i]->grad[k]);
      }
    }
    EXPECT_GT(norm, 0);
  }
}

TEST(BatchNormalizationModel, ReadsKerasConfigsAndNamesConfigErrorPaths) {
  // A Keras 3 layer config, verbatim.
  const json keras3 = {{"name", "batch_normalization"},
                       {"trainable", true},
                       {"dtype", "float32"},
                       {"axis", -1},
                       {"momentum", 0.99},
                       {"epsilon", 0.001},
                       {"center", true},
                       {"scale", true},
                       {"beta_initializer",
                        {{"module", "keras.initializers"},
                         {"class_name", "Zeros"},
                         {"config", json::object()},
                         {"registered_name", nullptr}}},
                       {"gamma_initializer",
                        {{"module", "keras.initializers"},
                         {"class_name", "Ones"},
                         {"config", json::object()},
                         {"registered_name", nullptr}}},
                       {"moving_mean_initializer", "zeros"},
                       {"moving_variance_initializer", "ones"},
                       {"beta_regularizer", nullptr},
                       {"gamma_regularizer", nullptr},
                       {"beta_constraint", nullptr},
                       {"gamma_constraint", nullptr},
                       {"synchronized", false}};
  auto m = Model::from_config(sequential({layer("InputLayer", {{"batch_shape", {nullptr, 5}}}),
                                          layer("BatchNormalization", keras3)}),
                              "model", 0);
  EXPECT_EQ(m->count_params(), 20);
  EXPECT_EQ(m->count_trainable_params(), 10);
  // Our own config reads back.
  EXPECT_EQ(Model::from_config(m->config(), "model", 0)->count_params(), 20);
  // tf.keras 2 keys: axis as a list with the positive index of the last axis, fused, renorm.
  auto tf2 = Model::from_config(
      sequential({layer("BatchNormalization", {{"axis", {2}},
                                               {"fused", true},
                                               {"renorm", false},
                                               {"renorm_clipping", nullptr},
                                               {"renorm_momentum", 0.99},
                                               {"virtual_batch_size", nullptr},
                                               {"adjustment", nullptr},
                                               {"batch_input_shape", {nullptr, 3, 4}}})}),
      "model", 0);
  EXPECT_EQ(tf2->count_params(), 16);

  auto bn = [](json extra) {
    return sequential({layer("Dense", {{"units", 8}, {"input_shape", {4, 8}}}),
                       layer("BatchNormalization", extra)});
  };
  EXPECT_NE(config_error(bn({{"momentun", 0.9}}))
                .find("'model.config.layers[1].config.momentun': unknown key"),
            std::string::npos);
  EXPECT_NE(config_error(bn({{"momentum", "0.9"}}))
                .find("'model.config.layers[1].config.momentum': expected a number"),
            std::string::npos);
  EXPECT_NE(config_error(bn({{"momentum", 1.5}})).find("'model.config.layers[1].config.momentum'"),
            std::string::npos);
  EXPECT_NE(config_error(bn({{"epsilon", 0}})).find("'model.config.layers[1].config.epsilon'"),
            std::string::npos);
  EXPECT_NE(config_error(bn({{"center", 1}})).find("'model.config.layers[1].config.center'"),
            std::string::npos);
  EXPECT_NE(config_error(bn({{"synchronized", "yes"}}))
                .find("'model.config.layers[1].config.synchronized'"),
            std::string::npos);
  EXPECT_NE(config_error(bn({{"gamma_regularizer", "l2"}}))
                .find("'model.config.layers[1].config.gamma_regularizer'"),
            std::string::npos);
  EXPECT_NE(config_error(bn({{"beta_initializer", "xavier"}}))
                .find("'model.config.layers[1].config.beta_initializer': unknown initializer"),
            std::string::npos);
  EXPECT_NE(config_error(bn({{"axis", "last"}})).find("'model.config.layers[1].config.axis'"),
            std::string::npos);
  EXPECT_NE(config_error(bn({{"axis", 0}})).find("'model.config.layers[1].config.axis'"),
            std::string::npos);
  // axis 1 of (None, 4, 8) exists but is not the last one: found at build, naming the layer.
  const std::string e = config_error(bn({{"axis", 1}}));
  EXPECT_NE(e.find("'model.config.layers[1]'"), std::string::npos) << e;
  EXPECT_NE(e.find("'batch_normalization'"), std::string::npos) << e;
  EXPECT_NE(e.find("not the last axis"), std::string::npos) << e;
}

// Embedding(1000, 16) on sequences of 10 -> Reshape (160) -> Dense(32) -> BatchNormalization:
// the counts Keras' summary prints.
TEST(EmbeddingReshapeBatchNormModel, KerasParameterCountsAndATrainingStep) {
  auto m = Model::from_config(
      sequential({layer("InputLayer", {{"batch_shape", {nullptr, 10}}}),
                  layer("Embedding", {{"input_dim", 1000}, {"output_dim", 16}}),
                  layer("Reshape", {{"target_shape", {160}}}), layer("Dense", {{"units", 32}}),
                  layer("BatchNormalization", json::object())}),
      "model", 3);
  EXPECT_EQ(m->layer(0).name(), "embedding");
  EXPECT_EQ(m->layer(1).name(), "reshape");
  EXPECT_EQ(m->layer(3).name(), "batch_normalization");
  EXPECT_EQ(m->layer_output_shape(0), (Shape{10, 16}));
  EXPECT_EQ(m->layer_output_shape(1), (Shape{160}));
  // 1000*16 + (160*32 + 32) + 4*32 = 16,000 + 5,152 + 128
  EXPECT_EQ(m->count_params(), 21280);
  EXPECT_EQ(m->count_trainable_params(), 21216);  // BN: gamma and beta only
  const std::string s = m->summary();
  EXPECT_NE(s.find("Total params: 21,280"), std::string::npos) << s;
  EXPECT_NE(s.find("Trainable params: 21,216"), std::string::npos) << s;
  EXPECT_NE(s.find("Non-trainable params: 64"), std::string::npos) << s;
  EXPECT_NE(s.find(" embedding (Embedding)" + std::string(42 - 22, ' ') +
                   "(None, 10, 16)            16,000"),
            std::string::npos)
      << s;

  // One step: the Embedding is the first layer with weights, so it gets no input gradient.
  Tensor x({4, 10});
  Rng rng(4);
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rng.below(1000));
  const Tensor& y = m->forward(x, true);
  ASSERT_EQ(y.shape(), (Shape{4, 32}));
  m->backward(test::random_tensor({4, 32}, 5));
  double table_grad = 0;
  for (float v : m->parameters()[0]->grad.values()) table_grad += std::fabs(v);
  EXPECT_GT(table_grad, 0.0);
  // The config round-trips.
  EXPECT_EQ(Model::from_config(m->config(), "model", 0)->count_params(), 21280);
}

}  // namespace
}  // namespace tandem::nn
