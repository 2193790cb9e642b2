// Keras' sample weights through the `tandem` binary: an HDF5 `sample_weight` dataset, the run's
// `class_weight` and `weighted_metrics`. class_weight trains exactly as the same weights given
// per sample; cpu:3 trains to the weights of cpu:1 with them; the weights change what is
// learned; `evaluate` reports Keras' weighted loss (sum of weight x loss over the samples'
// count) and weighted metric (sum of weight x value over the weights' sum), checked against
// PyTorch on the saved weights. What the weights or config can get wrong exits 2 naming it.
#include <gtest/gtest.h>

#include <fstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// 3 classes from a linear rule on 4 features; weights: by class (w_class, the class_weight
// below), random (w_rand), and broken ones.
constexpr const char* kWriteData = R"PY(
import sys, h5py, numpy as np
rng = np.random.default_rng(8)
n = 180
x = rng.normal(size=(n, 4)).astype(np.float32)
label = np.argmax(x @ rng.normal(size=(4, 3)), axis=1).astype(np.int64)
by_class = np.array([1.0, 3.0, 0.5], dtype=np.float32)
w_nan = np.ones(n, dtype=np.float32)
w_nan[7] = np.nan
w_negative = np.ones((n, 1), dtype=np.float32)
w_negative[11, 0] = -2.0
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = x
    f["label"] = label
    f["w_class"] = by_class[label]
    f["w_rand"] = rng.uniform(0.0, 2.0, size=n).astype(np.float32)
    f["w_2d"] = np.ones((n, 2), dtype=np.float32)
    f["w_short"] = np.ones(n - 1, dtype=np.float32)
    f["w_nan"] = w_nan
    f["w_negative"] = w_negative
    f["w_text"] = np.array([b"a"] * n)
)PY";

constexpr const char* kModel = R"({"class_name": "Sequential", "config": {"name": "weighted",
  "layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4], "name": "x"}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": 8, "activation": "relu"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}})";

json run_config(const fs::path& data) {
  return {{"name", "weighted"},
          {"seed", 5},
          {"epochs", 3},
          {"batch_size", 16},
          {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.02}}}}},
          {"loss", "sparse_categorical_crossentropy"},
          {"metrics", {"accuracy"}},
          {"model", json::parse(kModel)},
          {"data",
           {{"train",
             {{"type", "hdf5"}, {"path", data.string()}, {"x", "x"}, {"y", "label"}}}}}};
}

struct SampleWeightCli : ::testing::Test {
  void SetUp() override {
    dir = test::scratch_dir("sample-weight-cli");
    data = dir / "data.h5";
    auto w = test::run_python(dir / "write.py", kWriteData, data.string());
    ASSERT_EQ(w.exit_code, 0) << w.err;
  }

  test::CommandResult train(const std::string& name, const json& config,
                            const std::string& extra = "") {
    return test::train_in(dir, name, config, extra);
  }
  // A one-hot copy of the labels, "onehot", in the data file.
  void add_one_hot_targets() {
    auto r = run_command(std::string(test::system_python()) + " -c '\n"
                         "import h5py, numpy as np, sys\n"
                         "with h5py.File(sys.argv[1], \"a\") as f:\n"
                         "  f[\"onehot\"] = np.eye(3, dtype=np.float32)[f[\"label\"][()]]\n' " +
                         data.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  fs::path dir, data;
};

// 0 when the two checkpoints hold the same weights within `tolerance` (0: bit for bit), else 1
// (and what differs).
test::CommandResult compare_weights(const fs::path& a, const fs::path& b, double tolerance) {
  return run_command(std::string(test::system_python()) + " -c '\n"
                     "import h5py, sys, numpy as np\n"
                     "a, b = (h5py.File(p, \"r\")[\"model_weights\"] for p in sys.argv[1:3])\n"
                     "tolerance = float(sys.argv[3])\n"
                     "for layer in (\"hidden\", \"out\"):\n"
                     "  for w in (\"kernel:0\", \"bias:0\"):\n"
                     "    x, y = a[layer][layer][w][()], b[layer][layer][w][()]\n"
                     "    close = np.allclose(x, y, rtol=tolerance, atol=tolerance)\n"
                     "    same = x.tobytes() == y.tobytes() if tolerance == 0 else close\n"
                     "    if not same:\n"
                     "      print(layer, w, abs(x - y).max()); sys.exit(1)\n' " +
                     (a / "model.h5").string() + " " + (b / "model.h5").string() + " " +
                     std::to_string(tolerance));
}

TEST_F(SampleWeightCli, ClassWeightTrainsAsTheSameWeightsPerSampleOnAnyReplicaCount) {
  json by_class = run_config(data);
  by_class["class_weight"] = {{"0", 1.0}, {"1", 3.0}, {"2", 0.5}};
  json per_sample = run_config(data);
  per_sample["data"]["train"]["sample_weight"] = "w_class";
  const json plain = run_config(data);
  for (const auto& [name, config] :
       {std::pair{"class", by_class}, {"sample", per_sample}, {"plain", plain}}) {
    auto r = train(name, config);
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
  }
  auto split = train("sample-cpu3", per_sample, "--devices cpu:3");
  ASSERT_EQ(split.exit_code, 0) << split.err;

  auto same = compare_weights(dir / "class", dir / "sample", 0);
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  // Contract 1: the replicas' gradient sums differ from the template's only by float rounding.
  auto replicas = compare_weights(dir / "sample", dir / "sample-cpu3", 1e-5);
  EXPECT_EQ(replicas.exit_code, 0) << replicas.out << replicas.err;
  auto differs = compare_weights(dir / "sample", dir / "plain", 1e-3);
  EXPECT_EQ(differs.exit_code, 1) << "the weights changed nothing: " << differs.out << differs.err;
}

TEST_F(SampleWeightCli, EvaluateReportsKerasWeightedLossAndMetricsAsPyTorchComputesThem) {
  json config = run_config(data);
  config["weighted_metrics"] = {"accuracy", "mse"};
  config["metrics"] = {"accuracy"};
  config["loss"] = "categorical_crossentropy";
  add_one_hot_targets();  // for mse
  config["data"]["train"]["y"] = "onehot";
  config["data"]["test"] = config["data"]["train"];
  config["data"]["test"]["sample_weight"] = "w_rand";
  auto r = train("run", config);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  auto ev = run_command(test::tandem_cli() + " evaluate " + (dir / "run.json").string() +
                        " --weights " + (dir / "run" / "model.h5").string() + " --split test -q");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  const json logs = json::parse(ev.out);
  ASSERT_TRUE(logs.contains("weighted_accuracy")) << logs.dump();
  ASSERT_TRUE(logs.contains("mse")) << logs.dump();

  const std::string reference = std::string(test::system_python()) + " -c '\n"
      "import h5py, json, sys, torch\n"
      "d = h5py.File(sys.argv[1], \"r\")\n"
      "m = h5py.File(sys.argv[2], \"r\")[\"model_weights\"]\n"
      "t = lambda a: torch.tensor(a[()], dtype=torch.float64)\n"
      "x, y, w = t(d[\"x\"]), t(d[\"onehot\"]), t(d[\"w_rand\"])\n"
      "h = torch.relu(x @ t(m[\"hidden/hidden/kernel:0\"]) + t(m[\"hidden/hidden/bias:0\"]))\n"
      "p = torch.softmax(h @ t(m[\"out/out/kernel:0\"]) + t(m[\"out/out/bias:0\"]), dim=1)\n"
      "ce = -(y * torch.log(p.clamp(1e-7, 1 - 1e-7))).sum(dim=1)\n"
      "hit = (p.argmax(dim=1) == y.argmax(dim=1)).double()\n"
      "se = ((p - y) ** 2).mean(dim=1)\n"
      "print(json.dumps({\"loss\": float((w * ce).sum() / len(w)),\n"
      "  \"accuracy\": float(hit.mean()), \"weighted_accuracy\": float((w * hit).sum() / w.sum()),\n"
      "  \"mse\": float((w * se).sum() / w.sum()), \"unweighted_loss\": float(ce.mean())}))\n' " +
      data.string() + " " + (dir / "run" / "model.h5").string();
  auto ref = run_command(reference);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const json want = json::parse(ref.out);
  for (const char* key : {"loss", "accuracy", "weighted_accuracy", "mse"})
    EXPECT_NEAR(logs[key].get<double>(), want[key].get<double>(),
                1e-5 * std::max(1.0, std::fabs(want[key].get<double>())))
        << key;
  // The weights matter here: the plain mean is another number.
  EXPECT_GT(std::fabs(want["loss"].get<double>() - want["unweighted_loss"].get<double>()), 1e-3);
  EXPECT_GT(std::fabs(want["weighted_accuracy"].get<double>() - want["accuracy"].get<double>()),
            1e-4);
}

// AUC and MeanIoU of an evaluation over several batches on three replicas: Keras' formulas on
// the whole set's histogram (written again here in NumPy from PyTorch's predictions), not a
// mean of the batches' values; the ROC area is close to the exact share of ranked pairs.
TEST_F(SampleWeightCli, AucAndMeanIouOfAnEvaluationAreKerasFormulasOverTheWholeSet) {
  add_one_hot_targets();
  json config = run_config(data);
  config["loss"] = "categorical_crossentropy";
  config["epochs"] = 1;
  config["data"]["train"]["y"] = "onehot";
  config["data"]["test"] = config["data"]["train"];
  config["data"]["test"]["sample_weight"] = "w_rand";
  config["metrics"] = json::parse(R"(["AUC",
      {"class_name": "AUC", "config": {"curve": "PR", "name": "pr_auc"}},
      {"class_name": "OneHotMeanIoU", "config": {"num_classes": 3}}])");
  config["weighted_metrics"] = json::parse(R"(["AUC"])");
  auto r = train("run", config);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ev = run_command(test::tandem_cli() + " evaluate " + (dir / "run.json").string() +
                        " --weights " + (dir / "run" / "model.h5").string() +
                        " --split test --devices cpu:3 -q");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  const json logs = json::parse(ev.out);

  const std::string reference = std::string(test::system_python()) + " -c '\n"
      "import h5py, json, sys, torch, numpy as np\n"
      "d = h5py.File(sys.argv[1], \"r\")\n"
      "m = h5py.File(sys.argv[2], \"r\")[\"model_weights\"]\n"
      "t = lambda a: torch.tensor(a[()])\n"
      "h = torch.relu(t(d[\"x\"]) @ t(m[\"hidden/hidden/kernel:0\"]) + t(m[\"hidden/hidden/bias:0\"]))\n"
      "p = torch.softmax(h @ t(m[\"out/out/kernel:0\"]) + t(m[\"out/out/bias:0\"]), dim=1).numpy()\n"
      "y = d[\"onehot\"][()]; w = d[\"w_rand\"][()].astype(np.float64)\n"
      "T = 200\n"
      "def counts(w_rows):\n"
      "  b = np.maximum(np.ceil(np.clip(p, 0, 1) * np.float32(T - 1)) - 1, 0).astype(int).ravel()\n"
      "  ww = np.repeat(w_rows, 3); lab = y.ravel().astype(np.float64)\n"
      "  pos, neg = np.zeros(T), np.zeros(T)\n"
      "  np.add.at(pos, b, ww * lab); np.add.at(neg, b, ww * (1 - lab))\n"
      "  tp, fp = np.cumsum(pos[::-1])[::-1], np.cumsum(neg[::-1])[::-1]\n"
      "  return tp, fp, tp[0] - tp, fp[0] - fp\n"
      "div = lambda a, b: np.divide(a, b, out=np.zeros_like(a), where=b != 0)\n"
      "def roc(w_rows):\n"
      "  tp, fp, fn, tn = counts(w_rows); x, r = div(fp, fp + tn), div(tp, tp + fn)\n"
      "  return float(np.sum((x[:-1] - x[1:]) * (r[:-1] + r[1:]) / 2))\n"
      "def pr():\n"
      "  tp, fp, fn, tn = counts(np.ones(len(p))); q = tp + fp\n"
      "  dtp = tp[:-1] - tp[1:]; slope = div(dtp, np.maximum(q[:-1] - q[1:], 0))\n"
      "  icpt = tp[1:] - slope * q[1:]\n"
      "  ratio = np.where((q[:-1] > 0) & (q[1:] > 0), div(q[:-1], np.maximum(q[1:], 0)), 1.0)\n"
      "  return float(np.sum(div(slope * (dtp + icpt * np.log(ratio)), np.maximum(tp[1:] + fn[1:], 0))))\n"
      "cm = np.zeros((3, 3)); np.add.at(cm, (y.argmax(1), p.argmax(1)), 1)\n"
      "union = cm.sum(0) + cm.sum(1) - np.diag(cm)\n"
      "miou = float(np.sum(div(np.diag(cm), union)) / np.count_nonzero(union))\n"
      "s, lab = p.ravel(), y.ravel()\n"
      "exact = float(np.mean((s[lab == 1][:, None] > s[lab == 0][None, :]) + 0.5 * (s[lab == 1][:, None] == s[lab == 0][None, :])))\n"
      "print(json.dumps({\"auc\": roc(np.ones(len(p))), \"pr_auc\": pr(), \"one_hot_mean_io_u\": miou,\n"
      "  \"weighted_auc\": roc(w), \"exact\": exact}))\n' " +
      data.string() + " " + (dir / "run" / "model.h5").string();
  auto ref = run_command(reference);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const json want = json::parse(ref.out);
  // "AUC" given as a string is logged under it (Keras 3), and weighted as weighted_AUC.
  for (const auto& [key, reference_key] :
       std::vector<std::pair<std::string, std::string>>{{"AUC", "auc"},
                                                        {"pr_auc", "pr_auc"},
                                                        {"one_hot_mean_io_u", "one_hot_mean_io_u"},
                                                        {"weighted_AUC", "weighted_auc"}}) {
    ASSERT_TRUE(logs.contains(key)) << key << " in " << logs.dump();
    EXPECT_NEAR(logs[key].get<double>(), want[reference_key].get<double>(), 1e-6) << key;
  }
  EXPECT_NEAR(want["auc"].get<double>(), want["exact"].get<double>(), 0.01);
  EXPECT_GT(std::fabs(want["auc"].get<double>() - want["weighted_auc"].get<double>()), 1e-4);
}

TEST_F(SampleWeightCli, BadWeightsAndWeightSettingsExitTwoNamingThePlace) {
  struct Case {
    const char* what;
    json config;
    std::vector<std::string> expected;  // all in stderr
  };
  auto with_weights = [&](const char* name) {
    json c = run_config(data);
    c["data"]["train"]["sample_weight"] = name;
    return c;
  };
  auto with = [&](const char* key, const json& value) {
    json c = run_config(data);
    c[key] = value;
    return c;
  };
  json synthetic = run_config(data);
  synthetic["data"]["train"] = {{"type", "synthetic"}, {"samples", 64}, {"x_shape", {4}},
                                {"task", "classes"}, {"classes", 3}, {"sample_weight", "w"}};
  const std::vector<Case> cases = {
      {"two weights per sample",
       with_weights("w_2d"),
       {"'w_2d'", "the sample weights hold 2 values per sample",
        "output 'out' of shape (None, 3) takes one weight per sample"}},
      {"fewer weights than samples", with_weights("w_short"), {"'w_short'", "179"}},
      {"no such dataset", with_weights("nope"), {"no dataset 'nope'", "w_rand"}},
      {"text weights", with_weights("w_text"), {"'w_text'", "non-numeric"}},
      {"a NaN weight", with_weights("w_nan"), {"'w_nan' gives sample 7 the weight nan"}},
      {"a negative weight", with_weights("w_negative"), {"sample 11 the weight -2", "data.h5"}},
      {"an empty name", with_weights(""), {"data.train.sample_weight"}},
      {"weights on a synthetic set", synthetic, {"data.train.sample_weight"}},
      {"class_weight a list", with("class_weight", {1.0, 2.0}), {"class_weight", "object"}},
      {"class_weight by name", with("class_weight", {{"cat", 1.0}}), {"class_weight.cat"}},
      {"class_weight negative key", with("class_weight", {{"-1", 1.0}}), {"class_weight.-1"}},
      {"class_weight negative", with("class_weight", {{"1", -0.5}}), {"class_weight.1", ">= 0"}},
      {"class_weight text", with("class_weight", {{"1", "high"}}), {"class_weight.1"}},
      {"class_weight of a class the model lacks",
       with("class_weight", {{"7", 2.0}}),
       {"'class_weight': class 7 is not a class of model", "which has 3 (0 to 2)"}},
      {"weighted_metrics unknown",
       with("weighted_metrics", {"acuracy"}),
       {"weighted_metrics[0]", "acuracy"}},
      {"weighted_metrics a string", with("weighted_metrics", "accuracy"), {"weighted_metrics"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const fs::path path = dir / "bad.json";
    std::ofstream(path) << c.config.dump(2);
    auto r = run_command(test::tandem_cli() + " train " + path.string() + " --run-dir " +
                         (dir / ("bad-" + std::to_string(i))).string() + " -q");
    EXPECT_EQ(r.exit_code, 2) << c.what << ": " << r.err;
    for (const std::string& e : c.expected)
      EXPECT_NE(r.err.find(e), std::string::npos) << c.what << ": '" << e << "' in " << r.err;
    EXPECT_EQ(r.err.find("terminate"), std::string::npos) << c.what << ": " << r.err;
    // Refused before anything is written.
    EXPECT_FALSE(fs::exists(dir / ("bad-" + std::to_string(i)))) << c.what;
  }
  // null is no weights, as absent (it was an "unknown key").
  json unweighted = with_weights("w_rand");
  unweighted["data"]["train"]["sample_weight"] = nullptr;
  std::ofstream(dir / "null.json") << unweighted.dump(2);
  const auto r = run_command(test::tandem_cli() + " check " + (dir / "null.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Keras' temporal weights: a tagger (Dense on each of 6 steps) given one weight per step.
constexpr const char* kWriteSteps = R"PY(
import sys, h5py, numpy as np
rng = np.random.default_rng(11)
n, steps = 120, 6
x = rng.normal(size=(n, steps, 4)).astype(np.float32)
tags = np.argmax(x @ rng.normal(size=(4, 3)), axis=2).astype(np.int64)
w = rng.uniform(0.0, 2.0, size=(n, steps)).astype(np.float32)
w[:, 4:] *= 0.05  # the last steps count little
w[rng.random((n, steps)) < 0.2] = 0.0
w_nan = w.copy()
w_nan[3, 2] = np.nan
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = x
    f["tags"] = tags
    f["w_steps"] = w
    f["w_steps_3d"] = w[:, :, None]
    f["w_5"] = w[:, :5]
    f["w_nan"] = w_nan
)PY";

json tagger_config(const fs::path& data) {
  json c = run_config(data);
  c["name"] = "steps";
  c["model"] = json::parse(R"({"class_name": "Sequential", "config": {"name": "tagger",
    "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 6, 4], "name": "x"}},
    {"class_name": "Dense", "config": {"name": "hidden", "units": 8, "activation": "relu"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}})");
  c["data"]["train"] = {{"type", "hdf5"},
                        {"path", data.string()},
                        {"x", "x"},
                        {"y", "tags"},
                        {"sample_weight", "w_steps"}};
  c["weighted_metrics"] = {"accuracy"};
  return c;
}

// A weight per step trains the same on cpu:3 as on cpu:1 (contract 1), changes what is learned,
// and `evaluate` reports Keras' loss (Σ w·ce over every step / the steps) and weighted accuracy
// (Σ w·hit / Σ w), as PyTorch computes them from the saved weights; a (samples, steps, 1) file
// is the same weights.
TEST_F(SampleWeightCli, WeightsByStepWeighEachStepsLossAndMetricsAsKeras) {
  const fs::path steps = dir / "steps.h5";
  auto w = test::run_python(dir / "write_steps.py", kWriteSteps, steps.string());
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const json config = tagger_config(steps);
  json plain = config;
  plain["data"]["train"].erase("sample_weight");
  json three_d = config;
  three_d["data"]["train"]["sample_weight"] = "w_steps_3d";
  for (const auto& [name, c, extra] : {std::tuple{"one", config, ""},
                                       {"three", config, "--devices cpu:3"},
                                       {"plain", plain, ""},
                                       {"three_d", three_d, ""}}) {
    auto r = train(name, c, extra);
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
  }
  auto replicas = compare_weights(dir / "one", dir / "three", 1e-5);
  EXPECT_EQ(replicas.exit_code, 0) << replicas.out << replicas.err;
  auto same = compare_weights(dir / "one", dir / "three_d", 0);
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  auto differs = compare_weights(dir / "one", dir / "plain", 1e-3);
  EXPECT_EQ(differs.exit_code, 1) << "the weights changed nothing: " << differs.out << differs.err;

  json evaluated = config;
  evaluated["data"]["test"] = config["data"]["train"];
  std::ofstream(dir / "evaluate.json") << evaluated.dump(2);
  auto ev = run_command(test::tandem_cli() + " evaluate " + (dir / "evaluate.json").string() +
                        " --weights " + (dir / "one" / "model.h5").string() +
                        " --split test --devices cpu:2 -q");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  const json logs = json::parse(ev.out);
  const std::string reference =
      std::string(test::system_python()) +
      " -c '\n"
      "import h5py, json, sys, torch\n"
      "d = h5py.File(sys.argv[1], \"r\")\n"
      "m = h5py.File(sys.argv[2], \"r\")[\"model_weights\"]\n"
      "t = lambda a: torch.tensor(a[()], dtype=torch.float64)\n"
      "x, tags, w = t(d[\"x\"]), torch.tensor(d[\"tags\"][()]), t(d[\"w_steps\"])\n"
      "h = torch.relu(x @ t(m[\"hidden/hidden/kernel:0\"]) + t(m[\"hidden/hidden/bias:0\"]))\n"
      "p = torch.softmax(h @ t(m[\"out/out/kernel:0\"]) + t(m[\"out/out/bias:0\"]), dim=2)\n"
      "ce = -torch.log(p.clamp(1e-7, 1 - 1e-7).gather(2, tags[..., None])[..., 0])\n"
      "hit = (p.argmax(dim=2) == tags).double()\n"
      "per_sample = w.mean(dim=1, keepdim=True)\n"
      "print(json.dumps({\"loss\": float((w * ce).mean()), \"accuracy\": float(hit.mean()),\n"
      "  \"weighted_accuracy\": float((w * hit).sum() / w.sum()),\n"
      "  \"by_sample_mean\": float((per_sample * hit).sum() / per_sample.sum() / "
      "hit.shape[1])}))\n' " +
      steps.string() + " " + (dir / "one" / "model.h5").string();
  auto ref = run_command(reference);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const json want = json::parse(ref.out);
  for (const char* key : {"loss", "accuracy", "weighted_accuracy"}) {
    ASSERT_TRUE(logs.contains(key)) << key << " in " << logs.dump();
    EXPECT_NEAR(logs[key].get<double>(), want[key].get<double>(),
                1e-5 * std::max(1.0, std::fabs(want[key].get<double>())))
        << key;
  }
  // Each step's own weight counts, not its sample's mean weight.
  EXPECT_GT(
      std::fabs(want["weighted_accuracy"].get<double>() - want["by_sample_mean"].get<double>()),
      1e-3);
}

TEST_F(SampleWeightCli, WeightsByStepOfAnotherCountOrBadValuesExitTwoNamingThem) {
  const fs::path steps = dir / "steps.h5";
  auto w = test::run_python(dir / "write_steps.py", kWriteSteps, steps.string());
  ASSERT_EQ(w.exit_code, 0) << w.err;
  auto with_weights = [&](const char* name) {
    json c = tagger_config(steps);
    c["data"]["train"]["sample_weight"] = name;
    return c;
  };
  json class_weighted = tagger_config(steps);
  class_weighted["class_weight"] = {{"0", 2.0}};
  json several = run_config(data);  // one weight per sample for a model of one position
  several["data"]["train"]["sample_weight"] = "w_2d";
  const std::vector<std::tuple<const char*, json, std::string>> cases = {
      {"5 weights for 6 steps", with_weights("w_5"),
       "the sample weights hold 5 values per sample, but output 'out' of shape (None, 6, 3) takes "
       "one weight per sample or one per position, 6 (shape (None, 6))"},
      {"a NaN at a step", with_weights("w_nan"),
       "'w_nan' gives sample 3 the weight nan at position 2 of 6"},
      {"class_weight with steps", class_weighted,
       "'class_weight': weighs a sample by its one class"},
      {"2 weights for 1 position", several, "'w_2d'"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& [what, config, expected] = cases[i];
    auto r = train("bad-" + std::to_string(i), config);
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << what << ": " << r.err;
    EXPECT_FALSE(fs::exists(dir / ("bad-" + std::to_string(i)) / "model.h5")) << what;
  }
}

}  // namespace
}  // namespace tandem
