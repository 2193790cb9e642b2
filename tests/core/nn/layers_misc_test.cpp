// Flatten, Dropout and the Activation layer.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "gradient_check.hpp"
#include "nn/activation.hpp"
#include "nn/dropout.hpp"
#include "nn/flatten.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

DropoutOptions dropout_options(double rate, std::uint64_t seed) {
  DropoutOptions o;
  o.rate = rate;
  o.seed = seed;
  return o;
}

TEST(Flatten, ReshapesWithoutCopyAndBackPropagatesTheSameValues) {
  Flatten f("flatten");
  Rng init(0);
  EXPECT_EQ(f.build({2, 3, 4}, init), (Shape{24}));
  Tensor x = test::random_tensor({5, 2, 3, 4}, 1);
  const Tensor& y = f.forward(x, true);
  EXPECT_EQ(y.shape(), (Shape{5, 24}));
  EXPECT_EQ(y.data(), x.data());
  Tensor g = test::random_tensor({5, 24}, 2);
  const Tensor& gx = f.backward(g, true);
  EXPECT_EQ(gx.shape(), (Shape{5, 2, 3, 4}));
  for (std::int64_t i = 0; i < g.size(); ++i) EXPECT_EQ(gx[i], g[i]);
}

TEST(Dropout, IdentityAtInferenceAndInvertedScalingInTraining) {
  const double rate = 0.3;
  Dropout d("dropout", dropout_options(rate, 123));
  Rng init(0);
  d.build({1000}, init);
  Tensor x({20, 1000});
  x.fill(2.0f);
  const Tensor& inference = d.forward(x, false);
  for (float v : inference.values()) EXPECT_EQ(v, 2.0f);

  const Tensor y = d.forward(x, true).clone();
  std::int64_t zeros = 0;
  for (float v : y.values()) {
    if (v == 0.0f)
      ++zeros;
    else
      EXPECT_FLOAT_EQ(v, 2.0f / 0.7f);
  }
  const double frac = static_cast<double>(zeros) / static_cast<double>(y.size());
  EXPECT_NEAR(frac, rate, 0.01);  // 20000 draws: 4 standard deviations is ~0.013

  // The gradient is the same mask: d(sum w*y)/dx = w * y / x.
  Tensor w = test::random_tensor(y.shape(), 9);
  const Tensor& gx = d.backward(w, true);
  for (std::int64_t i = 0; i < y.size(); ++i) EXPECT_FLOAT_EQ(gx[i], w[i] * y[i] / 2.0f);
}

TEST(Dropout, SameSeedSameMaskAndStateRoundTrips) {
  Dropout a("d", dropout_options(0.5, 7)), b("d", dropout_options(0.5, 7));
  Rng init(0);
  a.build({64}, init);
  b.build({64}, init);
  Tensor x({4, 64});
  x.fill(1.0f);
  const Tensor ya = a.forward(x, true).clone();
  const Tensor yb = b.forward(x, true).clone();
  for (std::int64_t i = 0; i < ya.size(); ++i) EXPECT_EQ(ya[i], yb[i]);
  const auto saved = a.random_state();
  const Tensor next = a.forward(x, true).clone();
  a.set_random_state(saved);
  const Tensor again = a.forward(x, true).clone();
  for (std::int64_t i = 0; i < next.size(); ++i) EXPECT_EQ(next[i], again[i]);
  EXPECT_THROW(a.set_random_state({1, 2, 3}), DataError);
}

// The mask of a row depends on its place in the global batch, not on how the batch was split:
// two replicas holding rows [0, 3) and [3, 8) draw exactly the masks of one model holding all 8.
TEST(Dropout, MasksDoNotDependOnHowTheBatchIsSplit) {
  Dropout whole("d", dropout_options(0.4, 11)), first("d", dropout_options(0.4, 11)),
      second("d", dropout_options(0.4, 11));
  Rng init(0);
  for (Dropout* d : {&whole, &first, &second}) d->build({50}, init);
  Tensor x = test::random_tensor({8, 50}, 3, 0.5f, 1.5f);
  const Tensor all = whole.forward(x, true).clone();
  Tensor top = Tensor::view(x, 0, {3, 50}), bottom = Tensor::view(x, 3 * 50, {5, 50});
  first.set_sample_offset(0);
  second.set_sample_offset(3);
  const Tensor a = first.forward(top, true).clone();
  const Tensor b = second.forward(bottom, true).clone();
  for (std::int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], all[i]);
  for (std::int64_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], all[3 * 50 + i]);
  // A different step draws a different mask.
  const Tensor next = whole.forward(x, true).clone();
  int differ = 0;
  for (std::int64_t i = 0; i < next.size(); ++i) differ += next[i] != all[i];
  EXPECT_GT(differ, 50);
}

TEST(ActivationLayer, AppliesSoftmaxPerRowWithGradient) {
  Activation layer("activation", ActivationKind::softmax);
  Rng init(0);
  EXPECT_EQ(layer.build({6}, init), (Shape{6}));
  Tensor x = test::random_tensor({3, 6}, 4, -2, 2);
  const Tensor& y = layer.forward(x, true);
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int c = 0; c < 6; ++c) s += y[r * 6 + c];
    EXPECT_NEAR(s, 1.0, 1e-6);
  }
  Tensor w = test::random_tensor({3, 6}, 5);
  const Tensor& gx = layer.backward(w, true);
  auto wd = test::to_double(w);
  auto loss = [&](const std::vector<double>& v) {
    double total = 0;
    for (int r = 0; r < 3; ++r) {
      double z = 0;
      for (int c = 0; c < 6; ++c) z += std::exp(v[r * 6 + c]);
      for (int c = 0; c < 6; ++c) total += wd[r * 6 + c] * std::exp(v[r * 6 + c]) / z;
    }
    return total;
  };
  test::expect_close(test::to_double(gx), test::numeric_gradient(loss, test::to_double(x)), 1e-4,
                     1e-5, "softmax layer gradient");
}

// Keras' Softmax(axis=1) over (steps, features) samples: each feature's column over the steps
// sums to 1, the values and the gradient against the formula written out (central differences).
TEST(ActivationLayer, SoftmaxOverAnotherAxisThanTheLast) {
  for (const nlohmann::json& axis : {nlohmann::json(1), nlohmann::json::array({-3})}) {
    Activation layer("softmax", ActivationKind::softmax, "Softmax", {{"axis", axis}});
    Rng init(0);
    EXPECT_EQ(layer.build({3, 4, 2}, init), (Shape{3, 4, 2}));
    Tensor x = test::random_tensor({2, 3, 4, 2}, 6, -2, 2);
    const auto softmax_over_steps = [](const std::vector<double>& v) {
      std::vector<double> y(v.size());
      for (int n = 0; n < 2; ++n)
        for (int k = 0; k < 8; ++k) {  // (feature row, channel) of 4 x 2
          double z = 0;
          for (int t = 0; t < 3; ++t) z += std::exp(v[n * 24 + t * 8 + k]);
          for (int t = 0; t < 3; ++t) y[n * 24 + t * 8 + k] = std::exp(v[n * 24 + t * 8 + k]) / z;
        }
      return y;
    };
    const Tensor y = layer.forward(x, true).clone();
    test::expect_close(test::to_double(y), softmax_over_steps(test::to_double(x)), 1e-6, 1e-7,
                       "softmax over axis " + axis.dump());
    Tensor w = test::random_tensor({2, 3, 4, 2}, 7);
    const Tensor& gx = layer.backward(w, true);
    const auto wd = test::to_double(w);
    const auto loss = [&](const std::vector<double>& v) {
      const auto p = softmax_over_steps(v);
      double total = 0;
      for (std::size_t i = 0; i < p.size(); ++i) total += wd[i] * p[i];
      return total;
    };
    test::expect_close(test::to_double(gx), test::numeric_gradient(loss, test::to_double(x)), 1e-4,
                       1e-5, "softmax over axis " + axis.dump() + " gradient");
  }
}

}  // namespace
}  // namespace tandem::nn

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

std::unique_ptr<Model> one_layer(const std::string& cls, const nlohmann::json& config) {
  nlohmann::json c = config;
  c["input_shape"] = {3, 5};
  return Model::from_config({{"class_name", "Sequential"},
                             {"config", {{"layers", {{{"class_name", cls}, {"config", c}}}}}}},
                            "model", 0);
}

std::string refusal(const std::string& cls, const nlohmann::json& config) {
  try {
    one_layer(cls, config);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// ReLU, ELU and Softmax layers compute what the Activation layer of the same function does, and
// keep Keras' class names, default names and config keys.
TEST(ActivationLayers, KerasNamedActivationLayersAreTheirActivation) {
  const Tensor x = test::random_tensor({2, 3, 5}, 21, -2, 2);
  for (const auto& [cls, fn, name] :
       {std::tuple{"ReLU", "relu", "re_lu"}, std::tuple{"ELU", "elu", "elu"},
        std::tuple{"Softmax", "softmax", "softmax"}}) {
    auto layer = one_layer(cls, nlohmann::json::object());
    auto plain = one_layer("Activation", {{"activation", fn}});
    EXPECT_EQ(layer->layer(0).class_name(), cls);
    EXPECT_EQ(layer->layer(0).name(), name);
    const Tensor& a = layer->forward(x, false);
    const Tensor& b = plain->forward(x, false);
    ASSERT_EQ(a.shape(), b.shape());
    for (std::int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << cls << " " << i;
    // The config is Keras' and builds the same layer again.
    auto again = Model::from_config(layer->config(), "model", 0);
    EXPECT_EQ(again->layer(0).class_name(), cls);
  }
  EXPECT_EQ(one_layer("ReLU", {})->layer(0).config()["negative_slope"], 0.0);
  EXPECT_EQ(one_layer("Softmax", {})->layer(0).config()["axis"], -1);
}

// With parameters, ReLU, LeakyReLU and ELU compute Keras 3's formulas (values checked against
// PyTorch in tests/oracle); their configs round-trip; impossible parameters are refused at their
// key.
TEST(ActivationLayers, ParametrisedFormsComputeKerasFormulasAndBadValuesAreRefused) {
  // one_layer's models take (3, 5) samples: the six values of interest first, zeros after.
  Tensor x({1, 3, 5});
  const float probes[] = {-3, -1, 0.5f, 2, 5, 8};
  for (int i = 0; i < 6; ++i) x[i] = probes[i];
  const auto values = [&](const char* cls, nlohmann::json config) {
    auto m = one_layer(cls, config);
    const Tensor& y = m->forward(x, false);
    auto again = Model::from_config(m->config(), "model", 0);
    EXPECT_EQ(again->layer(0).config(), m->layer(0).config());
    return std::vector<float>(y.data(), y.data() + 6);
  };
  // relu6 with a leak below 0: -0.1 * relu(-x) + clip(relu(x), 0, 6)
  EXPECT_EQ(values("ReLU", {{"max_value", 6.0}, {"negative_slope", 0.1}}),
            (std::vector<float>{-0.3f, -0.1f, 0.5f, 2, 5, 6}));
  // a threshold of 1: x where x > 1, else 0 (no leak)
  EXPECT_EQ(values("ReLU", {{"threshold", 1.0}}), (std::vector<float>{0, 0, 0, 2, 5, 8}));
  EXPECT_EQ(values("LeakyReLU", nlohmann::json::object()),  // Keras' default slope 0.3
            (std::vector<float>{0.3f * -3, 0.3f * -1, 0.5f, 2, 5, 8}));
  EXPECT_EQ(values("LeakyReLU", {{"alpha", 0.5}}),  // Keras 2's key
            (std::vector<float>{-1.5f, -0.5f, 0.5f, 2, 5, 8}));
  const auto elu = values("ELU", {{"alpha", 0.5}});
  EXPECT_FLOAT_EQ(elu[0], static_cast<float>(0.5 * std::expm1(-3.0)));
  EXPECT_FLOAT_EQ(elu[3], 2.0f);

  EXPECT_NE(refusal("ReLU", {{"max_value", -1.0}})
                .find("'model.config.layers[0].config.max_value': expected a non-negative number"),
            std::string::npos)
      << refusal("ReLU", {{"max_value", -1.0}});
  EXPECT_NE(refusal("ReLU", {{"threshold", -0.5}})
                .find("'model.config.layers[0].config.threshold': expected a non-negative number"),
            std::string::npos)
      << refusal("ReLU", {{"threshold", -0.5}});
  EXPECT_NE(refusal("LeakyReLU", {{"alpha", 0.1}, {"negative_slope", 0.1}}).find("not both"),
            std::string::npos);
  EXPECT_NE(refusal("ELU", {{"alpha", "x"}}).find("expected a finite number"), std::string::npos);
  // Softmax's axis: -1, or the last axis counting the batch axis (2 for these (3, 5) samples),
  // alone or in a list: each row of 5 sums to 1.
  for (const nlohmann::json& last :
       {nlohmann::json(2), nlohmann::json::array({2}), nlohmann::json::array({-1})}) {
    auto m = one_layer("Softmax", {{"axis", last}});
    EXPECT_EQ(m->layer(0).config()["axis"], last);
    const Tensor& y = m->forward(x, false);
    double row = 0;
    for (int i = 10; i < 15; ++i) row += y[i];
    EXPECT_NEAR(row, 1.0, 1e-6) << last;
  }
  // Another axis (1 or -2: the 3 steps): each column of 3 sums to 1 (tests/core/nn: the
  // values and gradient by hand in SoftmaxOverAnotherAxis).
  for (const nlohmann::json& steps : {nlohmann::json(1), nlohmann::json(-2)}) {
    auto m = one_layer("Softmax", {{"axis", steps}});
    const Tensor& y = m->forward(x, false);
    double column = 0;
    for (int t = 0; t < 3; ++t) column += y[t * 5 + 4];  // feature 4
    EXPECT_NEAR(column, 1.0, 1e-6) << steps;
  }
  try {
    one_layer("Softmax", {{"axis", 3}});
    ADD_FAILURE() << "Softmax over axis 3 of (batch, 3, 5) was built";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("at 'model.config.layers[0]': layer 'softmax' (Softmax): "
                                         "axis 3 is not an axis of inputs (None, 3, 5) after the "
                                         "batch (1 to 2, or -1 to -2)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NE(refusal("Softmax", {{"axis", -3}}).find("axis -3 is not an axis of inputs"),
            std::string::npos);
  for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json(1.5),
                                    nlohmann::json::array({1, 2}), nlohmann::json("last")})
    EXPECT_NE(refusal("Softmax", {{"axis", bad}})
                  .find("'model.config.layers[0].config.axis': expected one axis after the batch"),
              std::string::npos)
        << bad << ": " << refusal("Softmax", {{"axis", bad}});
  EXPECT_EQ(refusal("ReLU", {{"max_value", nullptr}, {"threshold", 0}}), "(no error)");
}

// PReLU: Keras' default (alpha 0, so relu), an alpha per value or shared along axes, its
// config round-trips, and axes that are not the input's are refused at build (values and
// gradients against PyTorch: tests/oracle).
TEST(ActivationLayers, PReLUSharesAlphaAlongItsSharedAxes) {
  Tensor x({1, 3, 5});
  for (std::int64_t i = 0; i < 15; ++i) x[i] = static_cast<float>(i % 2 ? -1 - i : i);
  auto plain = one_layer("PReLU", nlohmann::json::object());
  EXPECT_EQ(plain->layer(0).name(), "p_re_lu");
  EXPECT_EQ(plain->layer(0).parameters()[0]->value.shape(), (Shape{3, 5}));
  const Tensor& y = plain->forward(x, false);
  for (std::int64_t i = 0; i < 15; ++i) EXPECT_EQ(y[i], std::max(0.0f, x[i])) << i;
  auto shared = one_layer("PReLU", {{"shared_axes", {1}},
                                    {"alpha_initializer",
                                     {{"class_name", "Constant"}, {"config", {{"value", 0.25}}}}}});
  EXPECT_EQ(shared->layer(0).parameters()[0]->value.shape(), (Shape{1, 5}));
  const Tensor& z = shared->forward(x, false);
  for (std::int64_t i = 0; i < 15; ++i) EXPECT_EQ(z[i], x[i] > 0 ? x[i] : 0.25f * x[i]) << i;
  auto again = Model::from_config(shared->config(), "model", 0);
  EXPECT_EQ(again->layer(0).config(), shared->layer(0).config());
  EXPECT_NE(refusal("PReLU", {{"shared_axes", {3}}}).find("shared axis 3 is not an axis"),
            std::string::npos)
      << refusal("PReLU", {{"shared_axes", {3}}});
  EXPECT_NE(refusal("PReLU", {{"shared_axes", {"1"}}}).find("config.shared_axes'"),
            std::string::npos);
  EXPECT_NE(refusal("PReLU", {{"alpha_regularizer", {{"class_name", "L2"}}}})
                .find("alpha_regularizer"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::nn
