#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.hpp"
#include "nn/loss.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using test::expect_close;
using test::numeric_gradient;

constexpr double kEps = 1e-7;

// Independent double-precision references: the SUM over samples of Keras' per-sample loss.
double ref_mse(const std::vector<double>& p, const std::vector<double>& t, int cols) {
  double s = 0;
  for (std::size_t i = 0; i < p.size(); ++i) s += (p[i] - t[i]) * (p[i] - t[i]);
  return s / cols;
}
double ref_bce_logits(const std::vector<double>& x, const std::vector<double>& t, int cols) {
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double p = 1 / (1 + std::exp(-x[i]));
    s += -(t[i] * std::log(p) + (1 - t[i]) * std::log(1 - p));
  }
  return s / cols;
}
double ref_bce_probs(const std::vector<double>& p, const std::vector<double>& t, int cols) {
  double s = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double q = std::clamp(p[i], kEps, 1 - kEps);
    s += -(t[i] * std::log(q) + (1 - t[i]) * std::log(1 - q));  // Keras 3: no ε in the log
  }
  return s / cols;
}
double ref_cce(const std::vector<double>& p, const std::vector<double>& t, int cols, bool logits) {
  double s = 0;
  for (std::size_t r = 0; r < p.size() / cols; ++r) {
    double z = 0;
    for (int c = 0; c < cols; ++c) z += logits ? std::exp(p[r * cols + c]) : p[r * cols + c];
    for (int c = 0; c < cols; ++c) {
      double q = (logits ? std::exp(p[r * cols + c]) : p[r * cols + c]) / z;
      if (!logits) q = std::clamp(q, kEps, 1 - kEps);
      s -= t[r * cols + c] * std::log(q);
    }
  }
  return s;
}

Tensor one_hot(const std::vector<int>& labels, int classes) {
  Tensor t({static_cast<std::int64_t>(labels.size()), classes});
  for (std::size_t r = 0; r < labels.size(); ++r)
    t[static_cast<std::int64_t>(r) * classes + labels[r]] = 1;
  return t;
}

void check(const Loss& loss, const Tensor& pred, const Tensor& target,
           const std::function<double(const std::vector<double>&)>& ref, const char* what) {
  const float scale = 0.25f;
  Tensor grad;
  const double value = loss.compute(pred, target, scale, &grad);
  const double expected = ref(test::to_double(pred));
  EXPECT_NEAR(value, expected, 1e-5 * (1 + std::fabs(expected))) << what;
  auto g = numeric_gradient(ref, test::to_double(pred));
  for (auto& v : g) v *= scale;
  expect_close(test::to_double(grad), g, 2e-3, 1e-6, std::string(what) + " gradient");
  // The value without a gradient request is the same.
  EXPECT_DOUBLE_EQ(loss.compute(pred, target, scale, nullptr), value) << what;
}

TEST(Losses, MeanSquaredErrorAndMeanAbsoluteError) {
  Tensor p = test::random_tensor({4, 3}, 1), t = test::random_tensor({4, 3}, 2);
  auto tv = test::to_double(t);
  check(
      *make_loss("mse", "loss"), p, t, [&](const auto& v) { return ref_mse(v, tv, 3); }, "mse");
  auto mae = make_loss("mean_absolute_error", "loss");
  Tensor grad;
  const double v = mae->compute(p, t, 1.0f, &grad);
  double expected = 0;
  for (std::int64_t i = 0; i < p.size(); ++i) expected += std::fabs(p[i] - t[i]) / 3;
  EXPECT_NEAR(v, expected, 1e-6);
  for (std::int64_t i = 0; i < p.size(); ++i)
    EXPECT_FLOAT_EQ(grad[i], (p[i] > t[i] ? 1.0f : -1.0f) / 3.0f);
}

TEST(Losses, BinaryCrossentropyFromLogitsAndProbabilities) {
  Tensor x = test::random_tensor({5, 2}, 3, -4, 4);
  Tensor t({5, 2});
  for (std::int64_t i = 0; i < t.size(); ++i) t[i] = (i % 3 == 0) ? 1.0f : 0.0f;
  auto tv = test::to_double(t);
  auto logits = make_loss(
      json{{"class_name", "BinaryCrossentropy"}, {"config", {{"from_logits", true}}}}, "loss");
  check(
      *logits, x, t, [&](const auto& v) { return ref_bce_logits(v, tv, 2); }, "bce logits");
  Tensor p = test::random_tensor({5, 2}, 4, 0.05f, 0.95f);
  check(
      *make_loss("binary_crossentropy", "loss"), p, t,
      [&](const auto& v) { return ref_bce_probs(v, tv, 2); }, "bce probabilities");
}

TEST(Losses, BinaryCrossentropyIsStableForExtremeLogits) {
  auto loss = make_loss(
      json{{"class_name", "BinaryCrossentropy"}, {"config", {{"from_logits", true}}}}, "loss");
  Tensor x = Tensor::from_vector({4, 1}, {-200.0f, 200.0f, 90.0f, -90.0f});
  Tensor t = Tensor::from_vector({4, 1}, {1.0f, 0.0f, 1.0f, 0.0f});
  Tensor grad;
  const double v = loss->compute(x, t, 1.0f, &grad);
  EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(v, 400.0, 1e-3);  // the two wrong ones cost |x| each, the right ones ~0
  EXPECT_FLOAT_EQ(grad[0], -1.0f);
  EXPECT_FLOAT_EQ(grad[1], 1.0f);
  // From probabilities, exact 0 and 1 are clipped as Keras clips them: finite.
  auto probs = make_loss("binary_crossentropy", "loss");
  Tensor p = Tensor::from_vector({2, 1}, {0.0f, 1.0f});
  Tensor wrong = Tensor::from_vector({2, 1}, {1.0f, 0.0f});
  const double pv = probs->compute(p, wrong, 1.0f, &grad);
  EXPECT_TRUE(std::isfinite(pv));
  // Keras' float32 arithmetic: 1 - 1e-7 rounds to 0.99999988f. Keras 3 takes the log of the
  // clipped value itself (log(1e-7) + log(1.19e-7)); Keras 2 added ε inside the log
  // (log(2e-7) + log(2.19e-7)).
  const float hi = 1.0f - 1e-7f;
  EXPECT_NEAR(pv, -std::log(1e-7f) - std::log(1.0f - hi), 1e-4);
  const double keras2 = make_loss("binary_crossentropy", "loss", KerasDefinitions::keras2)
                            ->compute(p, wrong, 1.0f, nullptr);
  EXPECT_NEAR(keras2, -std::log(1e-7f + 1e-7f) - std::log(1.0f - hi + 1e-7f), 1e-4);
  // Inside the clip, each definition's gradient is its own log's: -1/q (Keras 3), -1/(q + ε).
  Tensor q = Tensor::from_vector({1, 1}, {1e-6f}), one = Tensor::from_vector({1, 1}, {1.0f});
  probs->compute(q, one, 1.0f, &grad);
  EXPECT_FLOAT_EQ(grad[0], -1.0f / 1e-6f);
  make_loss("binary_crossentropy", "loss", KerasDefinitions::keras2)->compute(q, one, 1.0f, &grad);
  EXPECT_FLOAT_EQ(grad[0], -1.0f / (1e-6f + 1e-7f));
}

// A prediction whose norm is below the floor is divided by the floor: Keras 3's normalize
// floors a norm at ε = 1e-7, tf.keras 2's l2_normalize at 1e-6 (sqrt of 1e-12).
TEST(Losses, CosineSimilarityFloorsTinyNormsAsEachKerasDoes) {
  const Tensor p = Tensor::from_vector({1, 2}, {3e-7f, 4e-7f});  // norm 5e-7
  const Tensor t = Tensor::from_vector({1, 2}, {0.6f, 0.8f});    // unit, along p
  EXPECT_NEAR(make_loss("cosine_similarity", "loss")->compute(p, t, 1.0f, nullptr), -1.0, 1e-6);
  EXPECT_NEAR(make_loss("cosine_similarity", "loss", KerasDefinitions::keras2)
                  ->compute(p, t, 1.0f, nullptr),
              -0.5, 1e-6);
}

TEST(Losses, CategoricalAndSparseCategoricalAgree) {
  Tensor x = test::random_tensor({4, 5}, 5, -3, 3);
  std::vector<int> labels{0, 4, 2, 2};
  Tensor dense = one_hot(labels, 5);
  Tensor sparse = Tensor::from_vector({4}, {0, 4, 2, 2});
  auto dv = test::to_double(dense);
  for (bool logits : {true, false}) {
    Tensor in = x;
    if (!logits) in = test::random_tensor({4, 5}, 6, 0.01f, 1.0f);  // unnormalised probabilities
    json cfg = {{"from_logits", logits}};
    auto cce = make_loss(json{{"class_name", "CategoricalCrossentropy"}, {"config", cfg}}, "loss");
    auto scce =
        make_loss(json{{"class_name", "SparseCategoricalCrossentropy"}, {"config", cfg}}, "loss");
    auto ref = [&](const auto& v) { return ref_cce(v, dv, 5, logits); };
    check(*cce, in, dense, ref, logits ? "cce logits" : "cce probabilities");
    check(*scce, in, sparse, ref, logits ? "scce logits" : "scce probabilities");
  }
}

// An output with positions (a sequence's steps, an image's pixels): Keras takes a loss of the
// last axis at each position and averages every other axis, so a sample's loss is the mean of
// its positions' and the batch's gradient that of the positions as rows of their own. The
// reference: the same values as 6 rows of one position each, and the double-precision
// cross-entropy above.
TEST(Losses, LossesOfTheLastAxisAverageAnOutputsPositions) {
  const Tensor logits = test::random_tensor({2, 3, 4}, 8, -2, 2);
  const Tensor probabilities = test::random_tensor({2, 3, 4}, 9, 0.05f, 1.0f);
  const std::vector<int> labels{3, 0, 1, 1, 2, 0};
  const Tensor one_hots = one_hot(labels, 4).reshaped({2, 3, 4});
  const Tensor sparse = Tensor::from_vector({2, 3}, {3, 0, 1, 1, 2, 0});
  const json logits_cfg = {{"from_logits", true}};
  struct Case {
    json spec;
    const Tensor* pred;
    const Tensor* target;
  };
  const std::vector<Case> cases = {
      {{{"class_name", "CategoricalCrossentropy"}, {"config", logits_cfg}}, &logits, &one_hots},
      {{{"class_name", "SparseCategoricalCrossentropy"}, {"config", logits_cfg}}, &logits, &sparse},
      {json("sparse_categorical_crossentropy"), &probabilities, &sparse},
      {json("kl_divergence"), &probabilities, &one_hots},
      {json("cosine_similarity"), &logits, &probabilities},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec.dump());
    const auto loss = make_loss(c.spec, "loss");
    Tensor grad, row_grad;
    const double value = loss->compute(*c.pred, *c.target, 0.5f, &grad);
    const Tensor rows = c.pred->reshaped({6, 4});
    const Tensor row_targets = c.target->reshaped(c.target->rank() == 2 ? Shape{6} : Shape{6, 4});
    const double row_sum = loss->compute(rows, row_targets, 1.0f / 6, &row_grad);
    EXPECT_NEAR(value / 2, row_sum / 6, 1e-12 * std::fabs(row_sum));
    EXPECT_EQ(grad.shape(), c.pred->shape());
    expect_close(test::to_double(grad), test::to_double(row_grad), 1e-6, 1e-9, "gradient");
  }
  // The cross-entropy from logits by hand, per position.
  const auto scce = make_loss(cases[1].spec, "loss");
  EXPECT_NEAR(scce->compute(logits, sparse, 1, nullptr),
              ref_cce(test::to_double(logits), test::to_double(one_hots), 4, true) / 3, 1e-5);
  // Taken over a whole row of 12 values instead, KL divergence sums 3 positions: 3 times more.
  const auto kl = make_loss("kl_divergence", "loss");
  EXPECT_NEAR(kl->compute(probabilities.reshaped({2, 12}), one_hots.reshaped({2, 12}), 1, nullptr),
              3 * kl->compute(probabilities, one_hots, 1, nullptr), 1e-5);
  // An element-wise loss averages every value alike.
  const auto mse = make_loss("mse", "loss");
  EXPECT_NEAR(mse->compute(logits, probabilities, 1, nullptr),
              mse->compute(logits.reshaped({2, 12}), probabilities.reshaped({2, 12}), 1, nullptr),
              1e-12);
}

// Targets of a categorical loss on an output with positions: a class index per position
// (Keras takes the output's shape without its last axis, or with a last axis of one), or one-hot
// of the output's own shape; anything else is refused naming both shapes.
TEST(Losses, ClassIndicesPerPositionTakeTheOutputsShapeWithoutItsClasses) {
  auto scce = make_loss("sparse_categorical_crossentropy", "loss");
  EXPECT_NO_THROW(scce->check_shapes({7, 5}, {7}));
  EXPECT_NO_THROW(scce->check_shapes({7, 5}, {7, 1}));
  EXPECT_NO_THROW(scce->check_shapes({8, 8, 3}, {8, 8}));
  EXPECT_NO_THROW(scce->check_shapes({8, 8, 3}, {8, 8, 1}));
  try {
    scce->check_shapes({8, 8, 3}, {64});
    ADD_FAILURE() << "flattened labels accepted";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(),
                 "sparse_categorical_crossentropy: targets (None, 64) must hold one class index "
                 "per position of model outputs (None, 8, 8, 3), (None, 8, 8)");
  }
  EXPECT_THROW(scce->check_shapes({7, 5}, {7, 5}), ShapeError);
  EXPECT_THROW(scce->check_shapes({}, {}), ShapeError);
  auto cce = make_loss("categorical_crossentropy", "loss");
  EXPECT_NO_THROW(cce->check_shapes({7, 5}, {7, 5}));
  EXPECT_THROW(cce->check_shapes({7, 5}, {7}), ShapeError);
  // A label per position that is no class index is a DataError, as for one per sample.
  Tensor x({2, 3, 4});
  EXPECT_THROW(scce->compute(x, Tensor::from_vector({2, 3}, {0, 1, 2, 3, 4, 0}), 1, nullptr),
               DataError);
  EXPECT_THROW(scce->compute(x, Tensor({2, 4}), 1, nullptr), ShapeError);
}

TEST(Losses, LabelSmoothingMatchesSmoothedTargets) {
  Tensor x = test::random_tensor({3, 4}, 7, -2, 2);
  Tensor t = one_hot({1, 3, 0}, 4);
  auto smoothed = make_loss(json{{"class_name", "CategoricalCrossentropy"},
                                 {"config", {{"from_logits", true}, {"label_smoothing", 0.2}}}},
                            "loss");
  Tensor ts = t.clone();
  for (std::int64_t i = 0; i < ts.size(); ++i) ts[i] = ts[i] * 0.8f + 0.2f / 4;
  auto plain = make_loss(
      json{{"class_name", "CategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}, "loss");
  EXPECT_NEAR(smoothed->compute(x, t, 1, nullptr), plain->compute(x, ts, 1, nullptr), 1e-6);
}

TEST(Losses, BadLabelsAndShapesAreClearErrors) {
  auto scce = make_loss("sparse_categorical_crossentropy", "loss");
  Tensor x({2, 3});
  EXPECT_THROW(scce->compute(x, Tensor::from_vector({2}, {0, 3}), 1, nullptr), DataError);
  EXPECT_THROW(scce->compute(x, Tensor::from_vector({2}, {0.5f, 1}), 1, nullptr), DataError);
  EXPECT_THROW(scce->check_shapes({3}, {3}), ShapeError);
  EXPECT_NO_THROW(scce->check_shapes({3}, {}));
  EXPECT_NO_THROW(scce->check_shapes({3}, {1}));
  EXPECT_THROW(make_loss("mse", "loss")->compute(x, Tensor({2, 2}), 1, nullptr), ShapeError);
  // Class indices given to a loss that wants one-hot targets: the message says what to use.
  for (const char* name : {"categorical_crossentropy", "mse"}) {
    try {
      make_loss(name, "loss")->check_shapes({3}, {});
      ADD_FAILURE() << name << " took one value per sample for 3 outputs";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("targets (None,) do not match model outputs (None, 3) "
                                           "(class indices? sparse_categorical_crossentropy"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Losses, ConfigErrorsNameThePath) {
  try {
    make_loss("hinge_of_doom", "loss");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'loss'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("hinge_of_doom"), std::string::npos);
  }
  try {
    make_loss(json{{"class_name", "BinaryCrossentropy"}, {"config", {{"from_logits", "yes"}}}},
              "loss");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'loss.config.from_logits'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(
      make_loss(json{{"class_name", "BinaryCrossentropy"}, {"config", {{"frm_logits", true}}}},
                "loss"),
      ConfigError);
  EXPECT_THROW(make_loss(42, "loss"), ConfigError);
  // An axis other than the last is refused on every loss (it was ignored where Keras' class has
  // no axis of its own, as SparseCategoricalCrossentropy).
  for (const char* cls : {"SparseCategoricalCrossentropy", "CategoricalCrossentropy"}) {
    try {
      make_loss(json{{"class_name", cls}, {"config", {{"axis", 1}}}}, "loss");
      ADD_FAILURE() << cls;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'loss.config.axis'"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(make_loss(json{{"class_name", cls}, {"config", {{"axis", -1}}}}, "loss"));
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
