// A model with two inputs and two outputs under one Objective: the packed inputs reach the right
// layers, the loss is the weighted sum of each output's (Keras' loss_weights), each output's own
// loss and metrics are reported under Keras 2's names, and every gradient is the derivative of
// that weighted sum — all against a reference written independently in double precision, and
// central differences of it. Then what a config can get wrong, refused at its path.
#include "nn/objective.hpp"

#include <gtest/gtest.h>

#include <span>

#include <functional>

#include <cmath>

#include "backend/ops.hpp"
#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// a (3) -> trunk Dense 4 tanh; [trunk, b (2)] -> join -> cls Dense 3 (logits);
// trunk -> reg Dense 1. Outputs [cls, reg]. Keras 2's form.
json two_heads_config() {
  return json::parse(R"({"class_name": "Functional", "config": {"name": "two_heads", "layers": [
    {"class_name": "InputLayer", "name": "a", "config": {"batch_input_shape": [null, 3],
     "name": "a"}, "inbound_nodes": []},
    {"class_name": "InputLayer", "name": "b", "config": {"batch_input_shape": [null, 2],
     "name": "b"}, "inbound_nodes": []},
    {"class_name": "Dense", "name": "trunk", "config": {"name": "trunk", "units": 4,
     "activation": "tanh"}, "inbound_nodes": [[["a", 0, 0, {}]]]},
    {"class_name": "Concatenate", "name": "join", "config": {"name": "join", "axis": -1},
     "inbound_nodes": [[["trunk", 0, 0, {}], ["b", 0, 0, {}]]]},
    {"class_name": "Dense", "name": "cls", "config": {"name": "cls", "units": 3},
     "inbound_nodes": [[["join", 0, 0, {}]]]},
    {"class_name": "Dense", "name": "reg", "config": {"name": "reg", "units": 1},
     "inbound_nodes": [[["trunk", 0, 0, {}]]]}],
    "input_layers": [["a", 0, 0], ["b", 0, 0]],
    "output_layers": [["cls", 0, 0], ["reg", 0, 0]]},
    "keras_version": "2.15.0", "backend": "tensorflow"})");
}

const json kLoss = json::parse(R"({"cls": {"class_name": "SparseCategoricalCrossentropy",
  "config": {"from_logits": true}}, "reg": "mse"})");
const json kWeights = json::parse(R"({"cls": 1.0, "reg": 0.5})");
const json kMetrics = json::parse(R"({"cls": ["accuracy"], "reg": ["mae"]})");

constexpr std::int64_t kRows = 5;

// Packed rows: x = [a (3), b (2)], y = [class index, regression target].
Tensor packed_x() {
  return test::random_tensor({kRows, 5}, 7);
}
Tensor packed_y() {
  Tensor y({kRows, 2});
  for (std::int64_t r = 0; r < kRows; ++r) {
    y[2 * r] = static_cast<float>(r % 3);
    y[2 * r + 1] = 0.3f * static_cast<float>(r) - 0.5f;
  }
  return y;
}

// The parameters in one double vector: trunk kernel (3x4), bias (4); cls kernel (6x3), bias (3);
// reg kernel (4x1), bias (1); read by name so the layout is the reference's own.
const std::vector<std::string> kParams = {"trunk/kernel", "trunk/bias", "cls/kernel",
                                          "cls/bias",     "reg/kernel", "reg/bias"};

Parameter* parameter(Model& m, const std::string& name) {
  const auto names = m.parameter_names();
  const auto params = m.parameters();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return params[i];
  ADD_FAILURE() << "no parameter " << name;
  return nullptr;
}

std::vector<double> flat_parameters(Model& m, bool grads) {
  std::vector<double> v;
  for (const auto& n : kParams) {
    const Tensor& t = grads ? parameter(m, n)->grad : parameter(m, n)->value;
    v.insert(v.end(), t.data(), t.data() + t.size());
  }
  return v;
}

struct Reference {
  std::vector<std::vector<double>> cls, reg;  // per row
  double cls_loss = 0, reg_loss = 0;          // sums over rows
  double cls_hits = 0, reg_abs = 0;
  std::vector<double> cls_row_loss, reg_row_loss, row_hits;  // per row
};

// Written from Keras' definitions in double: Dense is x·K + b, sparse categorical
// cross-entropy from logits is logsumexp(z) - z[label], mse the mean squared difference.
Reference reference(const std::vector<double>& p, const Tensor& x, const Tensor& y) {
  const double* tk = p.data();
  const double* tb = tk + 12;
  const double* ck = tb + 4;
  const double* cb = ck + 18;
  const double* rk = cb + 3;
  const double* rb = rk + 4;
  Reference ref;
  for (std::int64_t r = 0; r < kRows; ++r) {
    double trunk[4], join[6];
    for (int j = 0; j < 4; ++j) {
      double s = tb[j];
      for (int i = 0; i < 3; ++i) s += x[r * 5 + i] * tk[i * 4 + j];
      trunk[j] = join[j] = std::tanh(s);
    }
    join[4] = x[r * 5 + 3], join[5] = x[r * 5 + 4];
    std::vector<double> z(3);
    for (int j = 0; j < 3; ++j) {
      z[j] = cb[j];
      for (int i = 0; i < 6; ++i) z[j] += join[i] * ck[i * 3 + j];
    }
    double reg = rb[0];
    for (int i = 0; i < 4; ++i) reg += trunk[i] * rk[i];
    const double top = std::max({z[0], z[1], z[2]});
    const double lse =
        top + std::log(std::exp(z[0] - top) + std::exp(z[1] - top) + std::exp(z[2] - top));
    const std::int64_t cols = y.size() / kRows;  // 2 targets, and a weight when weighted
    const auto label = static_cast<int>(y[cols * r]);
    ref.cls_row_loss.push_back(lse - z[static_cast<std::size_t>(label)]);
    ref.cls_loss += ref.cls_row_loss.back();
    const int best = static_cast<int>(std::max_element(z.begin(), z.end()) - z.begin());
    ref.row_hits.push_back(best == label ? 1 : 0);
    ref.cls_hits += ref.row_hits.back();
    const double d = reg - y[cols * r + 1];
    ref.reg_row_loss.push_back(d * d);
    ref.reg_loss += d * d;
    ref.reg_abs += std::fabs(d);
    ref.cls.push_back(z);
    ref.reg.push_back({reg});
  }
  return ref;
}

struct Step {
  std::unique_ptr<Model> model = Model::from_config(two_heads_config(), "model", 11);
  Objective objective = make_objective(kLoss, kWeights, kMetrics, *model);
  ObjectiveScratch scratch;
  std::unique_ptr<backend::Sums> sums = backend::cpu_backend().sums();

  StepSums train(const Tensor& x, const Tensor& y) {
    const auto& outputs = model->forward_outputs(x, true);
    objective.enqueue(backend::cpu_backend(), *model, outputs, y, 1.0f, true, scratch, *sums);
    model->backward_outputs(scratch.grad_views, [](std::size_t) {});
    return objective.read(*sums, x.dim(0));
  }
};

TEST(Objective, TwoInputsAndTwoOutputsFollowTheDoubleReference) {
  Step s;
  ASSERT_EQ(s.model->input_count(), 2u);
  ASSERT_EQ(s.model->output_count(), 2u);
  EXPECT_EQ(s.model->input_shape(), (Shape{5}));   // a (3) and b (2), packed
  EXPECT_EQ(s.model->output_shape(), (Shape{4}));  // cls (3) and reg (1), packed
  EXPECT_EQ(s.model->output_name(1), "reg");
  const Tensor x = packed_x(), y = packed_y();
  const Reference ref = reference(flat_parameters(*s.model, false), x, y);

  // Forward: each output apart, and packed in output order.
  const Tensor packed = s.model->forward(x, false).clone();
  ASSERT_EQ(packed.shape(), (Shape{kRows, 4}));
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (int j = 0; j < 3; ++j)
      EXPECT_NEAR(packed[r * 4 + j],
                  ref.cls[static_cast<std::size_t>(r)][static_cast<std::size_t>(j)], 1e-5);
    EXPECT_NEAR(packed[r * 4 + 3], ref.reg[static_cast<std::size_t>(r)][0], 1e-5);
  }

  // The loss is the weighted sum; each output's loss and metrics under its name.
  const StepSums sums = s.train(x, y);
  EXPECT_EQ(s.objective.metric_names(),
            (std::vector<std::string>{"cls_loss", "reg_loss", "cls_accuracy", "reg_mae"}));
  EXPECT_NEAR(sums.loss.sum, ref.cls_loss + 0.5 * ref.reg_loss, 1e-5 * (1 + ref.cls_loss));
  EXPECT_EQ(sums.loss.count, kRows);
  ASSERT_EQ(sums.metrics.size(), 4u);
  EXPECT_NEAR(sums.metrics[0].sum, ref.cls_loss, 1e-5 * (1 + ref.cls_loss));
  EXPECT_NEAR(sums.metrics[1].sum, ref.reg_loss, 1e-5 * (1 + ref.reg_loss));
  EXPECT_EQ(sums.metrics[2].sum, ref.cls_hits);
  EXPECT_NEAR(sums.metrics[3].sum, ref.reg_abs, 1e-5 * (1 + ref.reg_abs));

  // Every gradient is d(weighted sum)/d(parameter), by central differences of the reference.
  const std::vector<double> analytic = flat_parameters(*s.model, true);
  const std::vector<double> numeric = test::numeric_gradient(
      [&](const std::vector<double>& p) {
        const Reference r = reference(p, x, y);
        return r.cls_loss + 0.5 * r.reg_loss;
      },
      flat_parameters(*s.model, false));
  test::expect_close(analytic, numeric, 1e-4, 1e-5, "gradients of the weighted loss");
  // A negative control: the unweighted sum's gradient is another one.
  const std::vector<double> unweighted = test::numeric_gradient(
      [&](const std::vector<double>& p) {
        const Reference r = reference(p, x, y);
        return r.cls_loss + r.reg_loss;
      },
      flat_parameters(*s.model, false));
  double apart = 0;
  for (std::size_t i = 0; i < analytic.size(); ++i)
    apart = std::max(apart, std::fabs(analytic[i] - unweighted[i]));
  EXPECT_GT(apart, 1e-3);
}

// Keras' sample weights (the last value of each row of y): the loss sums weight x loss (read
// as a mean over the rows, not over the weights), its gradient is that sum's, plain metrics
// ignore the weights and weighted_metrics are weighted means, a name taken by a plain metric
// logged as weighted_<name>.
TEST(Objective, SampleWeightsWeighTheLossItsGradientsAndTheWeightedMetrics) {
  auto model = Model::from_config(two_heads_config(), "model", 11);
  const Objective o = make_objective(kLoss, kWeights, kMetrics, *model,
                                     json::parse(R"({"cls": ["accuracy"], "reg": ["mse"]})"));
  EXPECT_EQ(o.metric_names(),
            (std::vector<std::string>{"cls_loss", "reg_loss", "cls_accuracy", "reg_mae",
                                      "cls_weighted_accuracy", "reg_mse"}));
  const Tensor x = packed_x(), targets = packed_y();
  const std::vector<double> w = {0.5, 2.0, 0.0, 1.25, 3.0};
  Tensor y({kRows, 3});
  for (std::int64_t r = 0; r < kRows; ++r) {
    y[3 * r] = targets[2 * r];
    y[3 * r + 1] = targets[2 * r + 1];
    y[3 * r + 2] = static_cast<float>(w[static_cast<std::size_t>(r)]);
  }
  ObjectiveScratch scratch;
  auto sums = backend::cpu_backend().sums();
  o.enqueue(backend::cpu_backend(), *model, model->forward_outputs(x, true), y, 1.0f, true, scratch,
            *sums);
  model->backward_outputs(scratch.grad_views, [](std::size_t) {});
  const StepSums s = o.read(*sums, kRows);

  auto weighted = [&](const Reference& ref, auto row) {
    double total = 0;
    for (std::size_t r = 0; r < w.size(); ++r) total += w[r] * row(ref, r);
    return total;
  };
  auto loss = [&](const Reference& ref, std::size_t r) {
    return ref.cls_row_loss[r] + 0.5 * ref.reg_row_loss[r];
  };
  const Reference ref = reference(flat_parameters(*model, false), x, y);
  const double weight_sum = 6.75;
  EXPECT_NEAR(s.loss.sum, weighted(ref, loss), 1e-5 * weighted(ref, loss));
  EXPECT_EQ(s.loss.count, kRows);
  ASSERT_EQ(s.metrics.size(), 6u);
  const auto cls = [](const Reference& r, std::size_t i) { return r.cls_row_loss[i]; };
  const auto reg = [](const Reference& r, std::size_t i) { return r.reg_row_loss[i]; };
  const auto hit = [](const Reference& r, std::size_t i) { return r.row_hits[i]; };
  EXPECT_NEAR(s.metrics[0].sum, weighted(ref, cls), 1e-5 * weighted(ref, cls));
  EXPECT_NEAR(s.metrics[1].sum, weighted(ref, reg), 1e-5 * weighted(ref, reg));
  EXPECT_EQ(s.metrics[2].sum, ref.cls_hits);  // plain: unweighted
  EXPECT_EQ(s.metrics[2].count, kRows);
  EXPECT_NEAR(s.metrics[3].sum, ref.reg_abs, 1e-5 * ref.reg_abs);
  EXPECT_DOUBLE_EQ(s.metrics[4].sum, weighted(ref, hit));
  EXPECT_DOUBLE_EQ(s.metrics[4].count, weight_sum);
  EXPECT_NEAR(s.metrics[5].sum, weighted(ref, reg), 1e-5 * weighted(ref, reg));
  EXPECT_DOUBLE_EQ(s.metrics[5].count, weight_sum);
  EXPECT_NE(weighted(ref, hit) / weight_sum, ref.cls_hits / kRows);  // the weights matter

  const std::vector<double> analytic = flat_parameters(*model, true);
  const std::vector<double> numeric = test::numeric_gradient(
      [&](const std::vector<double>& p) { return weighted(reference(p, x, y), loss); },
      flat_parameters(*model, false));
  test::expect_close(analytic, numeric, 1e-4, 1e-5, "gradients of the weighted loss");

  // A device replica's label check reads past the weights.
  o.check_labels(y, *model);
  y[3] = 9;  // row 1's class
  EXPECT_THROW(o.check_labels(y, *model), DataError);
}

TEST(Objective, TargetsWithNeitherTheirOwnWidthNorOneWeightMoreAreRefused) {
  auto model = Model::from_config(two_heads_config(), "model", 11);
  const Objective o = make_objective(kLoss, kWeights, kMetrics, *model);
  ObjectiveScratch scratch;
  auto sums = backend::cpu_backend().sums();
  const Tensor x = packed_x();
  try {
    o.enqueue(backend::cpu_backend(), *model, model->forward_outputs(x, false), Tensor({kRows, 4}),
              1.0f, false, scratch, *sums);
    ADD_FAILURE() << "4 values per row accepted for 2 targets";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("2 target values each, or one more with the sample's "
                                         "weight"),
              std::string::npos)
        << e.what();
  }
}

// A data loader's check names the dataset's sample and the output, not a row of some batch on
// some replica (the loss said only "label 7 is not a class index"), and outlives the objective.
TEST(Objective, TheLabelCheckNamesTheSampleAndTheOutput) {
  auto model = Model::from_config(two_heads_config(), "model", 11);
  std::function<void(const Tensor&, std::span<const std::int64_t>)> check;
  {
    const Objective o = make_objective(kLoss, kWeights, kMetrics, *model);
    check = o.label_check(
        *model, [](std::int64_t i) { return "sample " + std::to_string(i) + " of the test data"; });
  }
  // Rows: (class, regression target), then (class, target, weight).
  Tensor y({3, 2});
  for (std::int64_t r = 0; r < 3; ++r) y[2 * r] = static_cast<float>(r), y[2 * r + 1] = 9.5f;
  const std::vector<std::int64_t> samples = {40, 7, 12};
  EXPECT_NO_THROW(check(y, samples));  // 9.5 is a regression target, not a label
  y[2] = 1.5f;
  try {
    check(y, samples);
    ADD_FAILURE() << "label 1.5 accepted";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(),
                 "sample 7 of the test data: label 1.5 for output 'cls' is not a class index in "
                 "[0, 3) (sparse_categorical_crossentropy takes integer class indices)");
  }
  Tensor weighted({2, 3});
  weighted[0] = 2, weighted[1] = 0.5f, weighted[2] = 1;
  weighted[3] = 3, weighted[4] = 0.5f, weighted[5] = 1;
  try {
    check(weighted, std::span(samples).first(2));
    ADD_FAILURE() << "label 3 of 3 classes accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("sample 7 of the test data: label 3 for output 'cls'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Objective, TheGraphRoundTripsThroughItsConfig) {
  auto m = Model::from_config(two_heads_config(), "model", 11);
  const json config = m->config();
  EXPECT_EQ(config["config"]["input_layers"], json::parse(R"([["a", 0, 0], ["b", 0, 0]])"));
  EXPECT_EQ(config["config"]["output_layers"], json::parse(R"([["cls", 0, 0], ["reg", 0, 0]])"));
  auto again = Model::from_config(config, "model", 11);
  EXPECT_EQ(again->input_count(), 2u);
  EXPECT_EQ(again->output_name(0), "cls");
  const std::string summary = m->summary();
  EXPECT_NE(summary.find(" a (InputLayer)"), std::string::npos) << summary;
  EXPECT_NE(summary.find(" b (InputLayer)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("'b[0][0]'"), std::string::npos) << summary;
}

TEST(Objective, OneOutputKeepsTheMetricsOwnNames) {
  auto m = Model::from_config(
      json::parse(R"({"class_name": "Sequential", "config": {"layers": [{"class_name": "Dense",
        "config": {"units": 3, "input_shape": [2]}}]}})"),
      "model", 1);
  const Objective o = make_objective("mse", json(), json::array({"mae"}), *m);
  EXPECT_EQ(o.metric_names(), (std::vector<std::string>{"mae"}));
  // The same loss spelled per output, by the output's name.
  const Objective named =
      make_objective(json{{m->output_name(0), "mse"}}, json(), json::array({"mae"}), *m);
  EXPECT_EQ(named.output(0).loss->name(), "mean_squared_error");
  // One output takes one number for loss_weights (Keras 3's CompileLoss takes a float).
  EXPECT_EQ(make_objective("mse", 2.5, json(), *m).output(0).weight, 2.5);
  EXPECT_THROW(make_objective("mse", -1.0, json(), *m), ConfigError);
}

TEST(Objective, ARatioMetricReportsItsOwnCount) {
  auto m = Model::from_config(two_heads_config(), "model", 11);
  const Objective o = make_objective(
      kLoss, kWeights,
      json::parse(R"({"reg": [{"class_name": "Precision", "config": {"thresholds": 0.0}}]})"), *m);
  const Tensor x = packed_x();
  Tensor y = packed_y();
  y[2 * 2 + 1] = 0;  // one actual negative
  const Reference ref = reference(flat_parameters(*m, false), x, y);
  // Counted by hand from the reference's outputs: above 0 is a predicted positive.
  double tp = 0, predicted = 0;
  for (std::int64_t r = 0; r < kRows; ++r) {
    const bool positive = ref.reg[static_cast<std::size_t>(r)][0] > 0.0;
    predicted += positive ? 1 : 0;
    tp += positive && y[2 * r + 1] != 0.0f ? 1 : 0;
  }
  ObjectiveScratch scratch;
  auto sums = backend::cpu_backend().sums();
  o.enqueue(backend::cpu_backend(), *m, m->forward_outputs(x, false), y, 1.0f, false, scratch,
            *sums);
  const StepSums s = o.read(*sums, kRows);
  ASSERT_EQ(o.metric_names(), (std::vector<std::string>{"cls_loss", "reg_loss", "reg_precision"}));
  EXPECT_EQ(s.metrics[2].sum, tp);
  EXPECT_EQ(s.metrics[2].count, predicted);
  EXPECT_GT(predicted, 0);  // not a comparison of two zeros
  EXPECT_EQ(s.metrics[0].count, kRows);
}

std::string config_error(const json& loss, const json& weights, const json& metrics) {
  auto m = Model::from_config(two_heads_config(), "model", 11);
  try {
    make_objective(loss, weights, metrics, *m);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Objective, BadLossesWeightsAndMetricsAreRefusedAtTheirPath) {
  EXPECT_NE(config_error(json{{"cls", "mse"}, {"nope", "mse"}}, json(), json())
                .find("at 'loss.nope': the model has no output 'nope' (its outputs: 'cls', "
                      "'reg')"),
            std::string::npos);
  EXPECT_NE(
      config_error(json{{"cls", "mse"}}, json(), json()).find("gives no loss for output 'reg'"),
      std::string::npos);
  EXPECT_NE(config_error(json::array({"mse"}), json(), json())
                .find("at 'loss': has 1 entries for the model's 2 outputs"),
            std::string::npos);
  EXPECT_NE(config_error(json::array({"mse", "not_a_loss"}), json(), json())
                .find("at 'loss[1]': unknown loss 'not_a_loss'"),
            std::string::npos);
  EXPECT_NE(config_error("mse", json::array({1.0, -2.0}), json())
                .find("at 'loss_weights[1]': expected a finite weight >= 0, got -2.0"),
            std::string::npos);
  EXPECT_NE(config_error("mse", json{{"cls", "heavy"}}, json())
                .find("at 'loss_weights.cls': expected a finite weight >= 0"),
            std::string::npos);
  EXPECT_NE(config_error("mse", json::array({1.0}), json())
                .find("at 'loss_weights': has 1 entries for the model's 2 outputs"),
            std::string::npos);
  EXPECT_NE(config_error("mse", 3, json()).find("at 'loss_weights': expected a list of weights"),
            std::string::npos);
  EXPECT_NE(config_error("mse", json(), json{{"head", json::array({"mae"})}})
                .find("at 'metrics.head': the model has no output 'head'"),
            std::string::npos);
  EXPECT_NE(config_error("mse", json(), "mae").find("at 'metrics': expected a list"),
            std::string::npos);
  // A list of lists is per output; a plain list is every output's.
  auto m = Model::from_config(two_heads_config(), "model", 11);
  const Objective lists =
      make_objective("mse", json(), json::parse(R"([["mae"], ["mse", "mae"]])"), *m);
  EXPECT_EQ(lists.metric_names(),
            (std::vector<std::string>{"cls_loss", "reg_loss", "cls_mae", "reg_mse", "reg_mae"}));
  const Objective shared = make_objective("mse", json(), json::array({"mae"}), *m);
  EXPECT_EQ(shared.metric_names(),
            (std::vector<std::string>{"cls_loss", "reg_loss", "cls_mae", "reg_mae"}));
}

TEST(Objective, TargetsThatDoNotFitTheOutputsAreNamed) {
  auto m = Model::from_config(two_heads_config(), "model", 11);
  const Objective o = make_objective(kLoss, kWeights, kMetrics, *m);
  o.check_targets(*m, {{2}});      // packed: one class index and one value
  o.check_targets(*m, {{}, {1}});  // apart
  try {
    o.check_targets(*m, {{3}});
    ADD_FAILURE() << "packed targets of 3 values accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("take 2 values per sample, packed (cls: 1, reg: 1)"),
              std::string::npos)
        << e.what();
  }
  try {
    o.check_targets(*m, {{}, {2}});
    ADD_FAILURE() << "regression targets of 2 values accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("output 'reg': "), std::string::npos) << e.what();
  }
  EXPECT_THROW(o.check_targets(*m, {{}, {1}, {1}}), ShapeError);
  // A label that is no class index, found on the host before a device would see it.
  Tensor y = packed_y();
  y[4] = 7;
  try {
    o.check_labels(y, *m);
    ADD_FAILURE() << "label 7 of 3 classes accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("label 7"), std::string::npos) << e.what();
  }
}

// A tagger: a Dense layer on each of 3 steps of 2 features gives 4 class logits per step; the
// data holds a class index per step and the sample's weight. Keras reduces the loss and the
// accuracies over the steps as over the samples (a sample's values: the mean of its steps'),
// counts every step in MeanIoU's confusion matrix, and weighs every step by its sample's weight.
json tagger_config() {
  return json::parse(R"({"class_name": "Sequential", "config": {"name": "tagger", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 3, 2], "name": "steps"}},
    {"class_name": "Dense", "config": {"name": "tags", "units": 4}}]}})");
}

struct TaggerReference {
  double loss = 0;  // Σ w · (mean over steps of the step's cross-entropy)
  double hits = 0;  // Σ mean over steps of argmax == label
  double weighted_hits = 0;
  double top2 = 0;  // Σ mean over steps of "label among the 2 largest"
  std::vector<double> confusion = std::vector<double>(16);  // label x argmax, every step
};

// Keras' definitions in double: Dense is x·K + b at each step; the loss logsumexp(z) - z[label].
TaggerReference tagger_reference(const std::vector<double>& p, const Tensor& x, const Tensor& y,
                                 std::int64_t rows) {
  TaggerReference ref;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double w = y[r * 4 + 3];
    double loss = 0, hits = 0, top2 = 0;
    for (std::int64_t t = 0; t < 3; ++t) {
      std::vector<double> z(4);
      for (std::size_t c = 0; c < 4; ++c) {
        z[c] = p[8 + c];
        for (std::size_t i = 0; i < 2; ++i)
          z[c] += x[(r * 3 + t) * 2 + static_cast<std::int64_t>(i)] * p[i * 4 + c];
      }
      const auto label = static_cast<std::size_t>(y[r * 4 + t]);
      double sum = 0;
      for (double v : z) sum += std::exp(v);
      loss += std::log(sum) - z[label];
      const auto best = static_cast<std::size_t>(std::max_element(z.begin(), z.end()) - z.begin());
      hits += best == label ? 1 : 0;
      int higher = 0;
      for (double v : z) higher += v > z[label] ? 1 : 0;
      top2 += higher < 2 ? 1 : 0;
      ref.confusion[label * 4 + best] += 1;
    }
    ref.loss += w * loss / 3;
    ref.hits += hits / 3;
    ref.weighted_hits += w * hits / 3;
    ref.top2 += top2 / 3;
  }
  return ref;
}

// Every parameter's values (or gradients) of `model` in one vector, in parameter order.
std::vector<double> parameters_in_order(Model& model, bool gradients) {
  std::vector<double> out;
  for (const Parameter* p : model.parameters()) {
    const Tensor& t = gradients ? p->grad : p->value;
    out.insert(out.end(), t.data(), t.data() + t.size());
  }
  return out;
}

// One training step of `o` on `model` (batch x, targets y): its sums, the gradients set.
StepSums tagger_step(const Objective& o, Model& model, const Tensor& x, const Tensor& y) {
  ObjectiveScratch scratch;
  auto sums = backend::cpu_backend().sums();
  o.enqueue(backend::cpu_backend(), model, model.forward_outputs(x, true), y, 1.0f, true, scratch,
            *sums);
  model.backward_outputs(scratch.grad_views, [](std::size_t) {});
  return o.read(*sums, x.dim(0));
}

TEST(Objective, AnOutputWithPositionsIsReducedOverThemAsKerasDoes) {
  auto model = Model::from_config(tagger_config(), "model", 5);
  const json metrics = json::parse(R"(["accuracy",
    {"class_name": "SparseTopKCategoricalAccuracy", "config": {"k": 2}},
    {"class_name": "MeanIoU", "config": {"num_classes": 4, "sparse_y_pred": false}}])");
  const Objective o =
      make_objective(json::parse(R"({"class_name": "SparseCategoricalCrossentropy", "config":
                      {"from_logits": true}})"),
                     json(), metrics, *model, json::array({"accuracy"}));
  EXPECT_EQ(o.metric_names(),
            (std::vector<std::string>{"accuracy", "sparse_top_k_categorical_accuracy", "mean_io_u",
                                      "weighted_accuracy"}));
  constexpr std::int64_t rows = 6;
  const Tensor x = test::random_tensor({rows, 3, 2}, 3, -2, 2);
  Tensor y({rows, 4});  // three steps' classes, then the sample's weight
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t t = 0; t < 3; ++t) y[r * 4 + t] = static_cast<float>((r + 2 * t) % 4);
    y[r * 4 + 3] = 0.25f * static_cast<float>(r + 1);
  }
  o.check_targets(*model, {{3}});
  const StepSums s = tagger_step(o, *model, x, y);
  const std::vector<double> params = parameters_in_order(*model, false);
  const TaggerReference ref = tagger_reference(params, x, y, rows);
  EXPECT_NEAR(s.loss.sum, ref.loss, 1e-5 * ref.loss);
  ASSERT_EQ(s.metrics.size(), 3u + 16u);
  EXPECT_NEAR(s.metrics[0].sum, ref.hits, 1e-12);
  EXPECT_EQ(s.metrics[0].count, rows);
  EXPECT_NEAR(s.metrics[1].sum, ref.top2, 1e-12);
  for (std::size_t cell = 0; cell < 16; ++cell)
    EXPECT_EQ(s.metrics[2 + cell].sum, ref.confusion[cell]) << "confusion cell " << cell;
  EXPECT_NEAR(s.metrics[18].sum, ref.weighted_hits, 1e-12);
  EXPECT_DOUBLE_EQ(s.metrics[18].count, 0.25 * (1 + 2 + 3 + 4 + 5 + 6));
  EXPECT_GT(ref.hits, 0);  // the metrics see something to count
  EXPECT_LT(ref.hits, rows);

  const std::vector<double> analytic = parameters_in_order(*model, true);
  const std::vector<double> numeric = test::numeric_gradient(
      [&](const std::vector<double>& p) { return tagger_reference(p, x, y, rows).loss; }, params);
  test::expect_close(analytic, numeric, 1e-4, 1e-6, "gradients of the loss over the steps");

  // A label per step, checked per step: the third step of row 2.
  y[2 * 4 + 2] = 4;
  try {
    o.check_labels(y, *model);
    ADD_FAILURE() << "label 4 of 4 classes accepted";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(),
                 "row 2 of the batch: label 4 at position 2 of 3 for output 'tags' is "
                 "not a class index in [0, 4) (sparse_categorical_crossentropy takes "
                 "integer class indices)");
  }
  EXPECT_THROW(o.check_targets(*model, {{1}}), ShapeError);
}

// Keras' temporal weights: one weight per step after the step's labels. Each step's loss and
// weighted metric value is weighed by its own weight — the loss Σ w·ce over every step divided by
// the samples' steps, the weighted accuracy Σ w·hit / Σ w, the weighted confusion matrix Σ w per
// cell —; plain metrics ignore them; the gradient is the loss's (central differences).
struct StepWeightedReference {
  double loss = 0, hits = 0, weighted_hits = 0, weight_sum = 0;  // Σ over rows of step means
  std::vector<double> confusion = std::vector<double>(16);
};

StepWeightedReference step_weighted_reference(const std::vector<double>& p, const Tensor& x,
                                              const Tensor& y, std::int64_t rows) {
  StepWeightedReference ref;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t t = 0; t < 3; ++t) {
      std::vector<double> z(4);
      for (std::size_t c = 0; c < 4; ++c) {
        z[c] = p[8 + c];
        for (std::size_t i = 0; i < 2; ++i)
          z[c] += x[(r * 3 + t) * 2 + static_cast<std::int64_t>(i)] * p[i * 4 + c];
      }
      const auto label = static_cast<std::size_t>(y[r * 6 + t]);
      const double w = y[r * 6 + 3 + t];
      double sum = 0;
      for (double v : z) sum += std::exp(v);
      const auto best = static_cast<std::size_t>(std::max_element(z.begin(), z.end()) - z.begin());
      ref.loss += w * (std::log(sum) - z[label]) / 3;
      ref.hits += (best == label ? 1 : 0) / 3.0;
      ref.weighted_hits += w * (best == label ? 1 : 0) / 3;
      ref.weight_sum += w / 3;
      ref.confusion[label * 4 + best] += w;
    }
  return ref;
}

TEST(Objective, WeightsByPositionWeighEachStepAsKerasTemporalWeights) {
  auto model = Model::from_config(tagger_config(), "model", 5);
  const json weighted_metrics = json::parse(R"(["accuracy",
    {"class_name": "MeanIoU", "config": {"num_classes": 4, "sparse_y_pred": false}}])");
  const Objective o =
      make_objective(json::parse(R"({"class_name": "SparseCategoricalCrossentropy", "config":
                      {"from_logits": true}})"),
                     json(), json::array({"accuracy"}), *model, weighted_metrics);
  constexpr std::int64_t rows = 6;
  const Tensor x = test::random_tensor({rows, 3, 2}, 3, -2, 2);
  Tensor y({rows, 6});  // three steps' classes, then each step's weight
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t t = 0; t < 3; ++t) {
      y[r * 6 + t] = static_cast<float>((r + 2 * t) % 4);
      y[r * 6 + 3 + t] = 0.25f * static_cast<float>((r * 3 + t * 5) % 7);  // 0 to 1.5
    }
  o.check_targets(*model, {{3}}, 3);
  const StepSums s = tagger_step(o, *model, x, y);
  const std::vector<double> params = parameters_in_order(*model, false);
  const StepWeightedReference ref = step_weighted_reference(params, x, y, rows);
  EXPECT_NEAR(s.loss.sum, ref.loss, 1e-5 * ref.loss);
  EXPECT_EQ(s.loss.count, rows);
  ASSERT_EQ(s.metrics.size(), 2u + 16u);
  EXPECT_NEAR(s.metrics[0].sum, ref.hits, 1e-12);  // plain accuracy: every step counts once
  EXPECT_EQ(s.metrics[0].count, rows);
  EXPECT_NEAR(s.metrics[1].sum, ref.weighted_hits, 1e-12);
  EXPECT_NEAR(s.metrics[1].count, ref.weight_sum, 1e-12);
  for (std::size_t cell = 0; cell < 16; ++cell)
    EXPECT_NEAR(s.metrics[2 + cell].sum, ref.confusion[cell], 1e-12) << "confusion cell " << cell;
  // The steps' own weights matter: their rows' mean weight would give another accuracy.
  EXPECT_GT(std::fabs(ref.weighted_hits / ref.weight_sum - ref.hits / rows), 1e-3);

  const std::vector<double> analytic = parameters_in_order(*model, true);
  const std::vector<double> numeric = test::numeric_gradient(
      [&](const std::vector<double>& p) { return step_weighted_reference(p, x, y, rows).loss; },
      params);
  test::expect_close(analytic, numeric, 1e-4, 1e-6, "gradients of the step-weighted loss");

  // The label check reads the labels before the weights.
  y[4 * 6 + 1] = 9;
  try {
    o.check_labels(y, *model);
    ADD_FAILURE() << "label 9 of 4 classes accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("row 4 of the batch: label 9 at position 1 of 3"),
              std::string::npos)
        << e.what();
  }
  y[4 * 6 + 1] = 1;
  y[4 * 6 + 5] = 7;  // a weight: not a label
  EXPECT_NO_THROW(o.check_labels(y, *model));
}

// A weight per position fits a model of one output with that many positions: another count, or
// a model of several outputs, is refused naming what it takes.
TEST(Objective, WeightsByPositionOfAnotherCountAreRefusedNamingWhatFits) {
  auto tagger = Model::from_config(tagger_config(), "model", 5);
  const Objective o = make_objective("sparse_categorical_crossentropy", json(), json(), *tagger);
  EXPECT_NO_THROW(o.check_targets(*tagger, {{3}}, 1));
  EXPECT_NO_THROW(o.check_targets(*tagger, {{3}}, 3));
  try {
    o.check_targets(*tagger, {{3}}, 4);
    ADD_FAILURE() << "4 weights for 3 steps accepted";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(),
                 "the sample weights hold 4 values per sample, but output 'tags' of shape "
                 "(None, 3, 4) takes one weight per sample or one per position, 3 (shape "
                 "(None, 3))");
  }
  auto heads = Model::from_config(two_heads_config(), "model", 5);
  const Objective two = make_objective(kLoss, kWeights, kMetrics, *heads);
  try {
    two.check_targets(*heads, {{2}}, 2);
    ADD_FAILURE() << "weights by position accepted for two outputs";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(),
                 "the sample weights hold 2 values per sample, but a model of several outputs "
                 "('cls', 'reg') takes one weight per sample");
  }
  // A batch whose rows fit no weight count says what it expected.
  Tensor y({2, 5});
  ObjectiveScratch scratch;
  auto sums = backend::cpu_backend().sums();
  const Tensor x = test::random_tensor({2, 3, 2}, 3);
  try {
    o.enqueue(backend::cpu_backend(), *tagger, tagger->forward_outputs(x, false), y, 1.0f, false,
              scratch, *sums);
    ADD_FAILURE() << "5 values per row accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("or one more with the sample's weight, or 3 more, one "
                                         "per position"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
