// Keras' weight constraints: each against values computed by hand from Keras' formulas
// (w · clip(‖w‖, lo, hi) / (1e-7 + ‖w‖), norms over Keras' `axis`), applied after every step of
// training through the meta-model (every replica alike: two replicas end on one replica's
// weights), their configs round-tripping, and bad ones refused at their path.
#include "nn/constraint.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/ops.hpp"
#include "parallel/replica_model.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

Tensor constrained(const json& spec, Tensor w) {
  WeightConstraint c(parse_constraint(spec, "c"));
  c.build(w.shape());
  c.apply(backend::cpu_backend(), w);
  return w;
}

// A (2, 3) kernel: column norms 5, 0.5 and 13 (3-4-5, 0.3-0.4-0.5, 5-12-13).
Tensor kernel() {
  return Tensor::from_vector({2, 3}, {3, 0.3f, 5, 4, 0.4f, 12});
}

TEST(Constraint, NormConstraintsScaleEachColumnAsKerasDoes) {
  const float eps = 1e-7f;
  // MaxNorm(2), axis 0: columns above norm 2 scaled to 2, the others kept (up to eps).
  const Tensor m = constrained({{"class_name", "MaxNorm"}, {"config", {{"max_value", 2.0}}}},
                               kernel());
  EXPECT_FLOAT_EQ(m[0], 3 * 2 / (eps + 5));
  EXPECT_FLOAT_EQ(m[3], 4 * 2 / (eps + 5));
  EXPECT_FLOAT_EQ(m[1], 0.3f * 0.5f / (eps + 0.5f));
  EXPECT_FLOAT_EQ(m[5], 12 * 2 / (eps + 13));
  // UnitNorm: every column to norm 1.
  const Tensor u = constrained("unit_norm", kernel());
  EXPECT_FLOAT_EQ(u[2], 5 / (eps + 13));
  EXPECT_FLOAT_EQ(u[4], 0.4f / (eps + 0.5f));
  // MinMaxNorm(1, 10, rate 0.5): half way between the norm and its clip.
  const Tensor mm = constrained(
      {{"class_name", "MinMaxNorm"},
       {"config", {{"min_value", 1.0}, {"max_value", 10.0}, {"rate", 0.5}, {"axis", 0}}}},
      kernel());
  EXPECT_FLOAT_EQ(mm[1], 0.3f * (0.5f * 1 + 0.5f * 0.5f) / (eps + 0.5f));
  EXPECT_FLOAT_EQ(mm[2], 5 * (0.5f * 10 + 0.5f * 13) / (eps + 13));
  EXPECT_FLOAT_EQ(mm[0], 3 * 5 / (eps + 5));  // norm 5 inside [1, 10]
  // axis 1: one norm per row instead (rows: sqrt(9 + 0.09 + 25), sqrt(16 + 0.16 + 144)).
  const Tensor rows = constrained({{"class_name", "MaxNorm"},
                                   {"config", {{"max_value", 1.0}, {"axis", 1}}}},
                                  kernel());
  const float r0 = std::sqrt(9 + 0.09f + 25);
  EXPECT_NEAR(rows[2], 5 / (eps + r0), 1e-6);
  // NonNeg: negatives to 0.
  const Tensor n = constrained("non_neg", Tensor::from_vector({4}, {-1, 2, -0.5f, 0}));
  EXPECT_EQ(n[0], 0.0f);
  EXPECT_EQ(n[1], 2.0f);
  EXPECT_EQ(n[2], 0.0f);
}

TEST(Constraint, ConvolutionKernelsTakeKerasAxisLists) {
  // A (2, 2, 1, 2) kernel, norms over axes [0, 1, 2]: one per filter.
  Tensor k = Tensor::from_vector({2, 2, 1, 2}, {1, 0, 1, 0, 1, 0, 1, 3});
  const Tensor c = constrained({{"class_name", "MaxNorm"},
                                {"config", {{"max_value", 1.0}, {"axis", {0, 1, 2}}}}},
                               k);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(c[2 * i], 0.5, 1e-6) << i;  // filter 0: norm 2
  EXPECT_NEAR(c[7], 1.0, 1e-6);                                      // filter 1: norm 3
  // A negative axis counts from the end.
  const Tensor last = constrained({{"class_name", "UnitNorm"}, {"config", {{"axis", -1}}}},
                                  Tensor::from_vector({1, 2}, {3, 4}));
  EXPECT_NEAR(last[0], 0.6, 1e-6);
}

json dense_model(const json& constraint) {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "Dense"},
               {"config",
                {{"units", 4},
                 {"input_shape", {6}},
                 {"kernel_constraint", constraint},
                 {"kernel_initializer",
                  {{"class_name", "RandomNormal"}, {"config", {{"stddev", 1.0}}}}}}}},
              {{"class_name", "Dense"}, {"config", {{"units", 3}}}}}}}}};
}

TEST(Constraint, TrainingKeepsEveryStepsWeightsConstrainedOnAnyReplicaCount) {
  const json max_norm = {{"class_name", "MaxNorm"}, {"config", {{"max_value", 0.5}}}};
  std::vector<std::unique_ptr<Model>> models;
  for (int replicas : {1, 2}) {
    auto model = Model::from_config(dense_model(max_norm), "model", 3);
    auto loss = make_loss("mse", "loss");
    auto opt = make_optimizer(json{{"class_name", "SGD"}, {"config", {{"learning_rate", 0.5}}}},
                              "optimizer");
    ReplicaModel meta(*model, *opt, DevicePlan::cpus(replicas));
    for (int step = 0; step < 3; ++step) {
      Batch b;
      b.x = Tensor({8, 6});
      b.y = Tensor({8, 3});
      for (std::int64_t i = 0; i < b.x.size(); ++i) b.x[i] = std::sin(0.7f * i + step);
      for (std::int64_t i = 0; i < b.y.size(); ++i) b.y[i] = std::cos(0.3f * i);
      meta.forward_backward(b, *loss, {});
      meta.apply_update();
      meta.sync_template();
      const Tensor& w = model->layer(0).parameters()[0]->value;
      for (int col = 0; col < 4; ++col) {
        double norm = 0;
        for (int row = 0; row < 6; ++row) norm += w[row * 4 + col] * w[row * 4 + col];
        EXPECT_LE(std::sqrt(norm), 0.5 + 1e-6) << replicas << " replicas, step " << step;
      }
    }
    models.push_back(std::move(model));
  }
  const auto a = models[0]->parameters(), b = models[1]->parameters();
  for (std::size_t p = 0; p < a.size(); ++p)
    for (std::int64_t i = 0; i < a[p]->value.size(); ++i)
      EXPECT_NEAR(a[p]->value[i], b[p]->value[i], 1e-6) << p << " " << i;
  // Without the constraint the norms are far above (the initial ones alone are ~sqrt(6)).
  auto free_model = Model::from_config(dense_model(nullptr), "model", 3);
  const Tensor& w0 = free_model->layer(0).parameters()[0]->value;
  double norm = 0;
  for (int row = 0; row < 6; ++row) norm += w0[row * 4] * w0[row * 4];
  EXPECT_GT(std::sqrt(norm), 1.0);
}

// Conv1D: Keras' kernel (k, in, filters) and its axes — MaxNorm over [0, 1] is one norm per
// filter — though a Conv2D computes it; its L2 penalty is in the loss; both written back.
TEST(Constraint, Conv1DRulesUseKerasKernelAxes) {
  const json conv1d = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {{{"class_name", "Conv1D"},
           {"config",
            {{"filters", 3},
             {"kernel_size", 2},
             {"input_shape", {5, 4}},
             {"kernel_constraint",
              {{"class_name", "MaxNorm"}, {"config", {{"max_value", 0.3}, {"axis", {0, 1}}}}}},
             {"kernel_regularizer", {{"class_name", "L2"}, {"config", {{"l2", 0.1}}}}},
             {"kernel_initializer",
              {{"class_name", "RandomNormal"}, {"config", {{"stddev", 1.0}}}}}}}},
          {{"class_name", "Flatten"}, {"config", json::object()}}}}}}};
  auto model = Model::from_config(conv1d, "model", 8);
  const json written = model->config()["config"]["layers"][0]["config"];
  EXPECT_EQ(written["kernel_constraint"]["config"]["axis"], json({0, 1}));
  EXPECT_EQ(written["kernel_regularizer"]["config"]["l2"], 0.1);
  const Tensor& w = model->layer(0).parameters()[0]->value;
  ASSERT_EQ(w.shape(), (Shape{2, 4, 3}));
  auto filter_norm = [&](int f) {
    double n = 0;
    for (int i = 0; i < 8; ++i) n += static_cast<double>(w[i * 3 + f]) * w[i * 3 + f];
    return std::sqrt(n);
  };
  double penalty = 0;
  for (std::int64_t i = 0; i < w.size(); ++i) penalty += 0.1 * w[i] * w[i];
  auto loss = make_loss("mse", "loss");
  auto opt = make_optimizer(json{{"class_name", "SGD"}, {"config", {{"learning_rate", 0.01}}}},
                            "optimizer");
  ReplicaModel meta(*model, *opt, DevicePlan::cpus(2));
  Batch b;
  b.x = Tensor({4, 5, 4});
  b.y = Tensor({4, 12});
  for (std::int64_t i = 0; i < b.x.size(); ++i) b.x[i] = std::sin(0.3f * i);
  json without = conv1d;
  without["config"]["layers"][0]["config"].erase("kernel_regularizer");
  auto unregularized = Model::from_config(without, "model", 8);
  unregularized->copy_weights_from(*model);
  auto opt2 = make_optimizer("sgd", "o");
  ReplicaModel plain(*unregularized, *opt2, DevicePlan::cpus(1));
  const double with_penalty = meta.evaluate(b, *loss, {}).loss.mean();
  EXPECT_NEAR(with_penalty - plain.evaluate(b, *loss, {}).loss.mean(), penalty, 1e-5 * penalty);
  EXPECT_GT(filter_norm(0), 0.3);  // the initial weights break the constraint
  meta.forward_backward(b, *loss, {});
  meta.apply_update();
  meta.sync_template();
  for (int f = 0; f < 3; ++f) EXPECT_NEAR(filter_norm(f), 0.3, 1e-5) << f;
}

// SeparableConv1D's two kernels in Keras' shapes, depthwise (k, in, multiplier) and pointwise
// (1, in · multiplier, filters), each with its own rule on its own axes — MaxNorm over the taps
// (axis 0) of each depthwise filter, UnitNorm over the inputs (axis 1) of each pointwise filter —
// and DepthwiseConv1D's the same as SeparableConv1D's depthwise part; written back under Keras'
// keys.
TEST(Constraint, DepthwiseAndSeparableConv1DRulesUseKerasKernelAxes) {
  const json max_norm = {{"class_name", "MaxNorm"}, {"config", {{"max_value", 0.2}, {"axis", 0}}}};
  const json unit_norm = {{"class_name", "UnitNorm"}, {"config", {{"axis", 1}}}};
  const json wide = {{"class_name", "RandomNormal"}, {"config", {{"stddev", 1.0}}}};
  const auto model_of = [&](const char* cls, json config) {
    config["kernel_size"] = 3;
    config["depth_multiplier"] = 2;
    config["input_shape"] = {6, 4};
    config["depthwise_constraint"] = max_norm;
    config["depthwise_initializer"] = wide;
    return json{{"class_name", "Sequential"},
                {"config",
                 {{"layers",
                   {{{"class_name", cls}, {"config", config}},
                    {{"class_name", "Flatten"}, {"config", json::object()}}}}}}};
  };
  const json separable = model_of(
      "SeparableConv1D",
      {{"filters", 3}, {"pointwise_constraint", unit_norm}, {"pointwise_initializer", wide}});
  const json depthwise = model_of("DepthwiseConv1D", json::object());
  for (const json& config : {separable, depthwise}) {
    SCOPED_TRACE(config["config"]["layers"][0]["class_name"].get<std::string>());
    const bool is_separable = config == separable;
    auto model = Model::from_config(config, "model", 8);
    const json written = model->config()["config"]["layers"][0]["config"];
    EXPECT_EQ(written["depthwise_constraint"], max_norm);
    if (is_separable) EXPECT_EQ(written["pointwise_constraint"], unit_norm);
    const auto weights = model->layer(0).parameters();
    ASSERT_EQ(weights[0]->value.shape(), (Shape{3, 4, 2}));
    if (is_separable) ASSERT_EQ(weights[1]->value.shape(), (Shape{1, 8, 3}));
    // Norms of weights[p] over axis `axis` of its shape (3-D), one per other index.
    const auto norms = [&](std::size_t p, int axis) {
      const Tensor& w = weights[p]->value;
      const Shape& d = w.shape();
      std::vector<double> out;
      for (std::int64_t a = 0; a < (axis == 0 ? 1 : d[0]); ++a)
        for (std::int64_t b = 0; b < (axis == 1 ? 1 : d[1]); ++b)
          for (std::int64_t c = 0; c < d[2]; ++c) {
            double n = 0;
            for (std::int64_t i = 0; i < d[axis]; ++i) {
              const std::int64_t at = ((axis == 0 ? i : a) * d[1] + (axis == 1 ? i : b)) * d[2] + c;
              n += static_cast<double>(w[at]) * w[at];
            }
            out.push_back(std::sqrt(n));
          }
      return out;
    };
    const std::vector<double> initial = norms(0, 0);
    ASSERT_EQ(initial.size(), 8u);  // one per (input, multiplier)
    EXPECT_GT(*std::max_element(initial.begin(), initial.end()), 0.2);
    auto loss = make_loss("mse", "loss");
    auto opt = make_optimizer(json{{"class_name", "SGD"}, {"config", {{"learning_rate", 0.01}}}},
                              "optimizer");
    ReplicaModel meta(*model, *opt, DevicePlan::cpus(2));
    Batch b;
    b.x = Tensor({4, 6, 4});
    b.y = Tensor({4, model->output_shape(0)[0]});
    for (std::int64_t i = 0; i < b.x.size(); ++i) b.x[i] = std::sin(0.3f * i);
    meta.forward_backward(b, *loss, {});
    meta.apply_update();
    meta.sync_template();
    for (double n : norms(0, 0)) EXPECT_LE(n, 0.2 + 1e-6);
    if (is_separable) {
      ASSERT_EQ(norms(1, 1).size(), 3u);  // one per filter
      for (double n : norms(1, 1)) EXPECT_NEAR(n, 1.0, 1e-5);
    }
  }
}

TEST(Constraint, ConfigsRoundTripAndBadOnesNameTheirPath) {
  auto m = Model::from_config(
      dense_model({{"class_name", "MinMaxNorm"},
                   {"config", {{"min_value", 0.5}, {"max_value", 2.0}, {"rate", 0.25}}}}),
      "model", 1);
  const json c = m->layer(0).config()["kernel_constraint"];
  EXPECT_EQ(c["class_name"], "MinMaxNorm");
  EXPECT_EQ(c["config"]["rate"], 0.25);
  EXPECT_EQ(Model::from_config(m->config(), "model", 1)->layer(0).config()["kernel_constraint"], c);
  EXPECT_TRUE(m->layer(0).config()["bias_constraint"].is_null());
  const auto error_of = [](const json& constraint) {
    try {
      Model::from_config(dense_model(constraint), "model", 1);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of({{"class_name", "MaxNormal"}})
                .find("'model.config.layers[0].config.kernel_constraint.class_name': unknown "
                      "constraint 'MaxNormal'"),
            std::string::npos);
  EXPECT_NE(error_of({{"class_name", "MaxNorm"}, {"config", {{"max_value", -1}}}})
                .find("kernel_constraint.config.max_value"),
            std::string::npos);
  EXPECT_NE(error_of({{"class_name", "MaxNorm"}, {"config", {{"axis", 2}}}})
                .find("constraint axis 2 is not an axis of its weight, of shape (6, 4)"),
            std::string::npos)
      << error_of({{"class_name", "MaxNorm"}, {"config", {{"axis", 2}}}});
  EXPECT_NE(error_of({{"class_name", "MinMaxNorm"},
                      {"config", {{"min_value", 3}, {"max_value", 1}}}})
                .find("must not be below min_value"),
            std::string::npos);
  EXPECT_NE(error_of({{"class_name", "NonNeg"}, {"config", {{"axis", 0}}}})
                .find("kernel_constraint.config.axis"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::nn
