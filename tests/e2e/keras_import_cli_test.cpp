// `tandem import`: a Keras HDF5 model file with its training_config (in TensorFlow 2's form: a
// serialized loss, MeanMetricWrapper metrics per output, a registered "Custom>Adam") becomes a
// run config that trains from the file's weights; Keras 2's legacy optimizer keys come through
// with warnings; what cannot be imported is exit code 2 with nothing written. The files are
// written by h5py (training_config set on a Tandem checkpoint, which has Keras' layout).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

constexpr const char* kSetAttr = R"PY(
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    if sys.argv[2] == "-":
        del f.attrs[sys.argv[3]]
    else:
        f.attrs[sys.argv[2]] = sys.argv[3]
)PY";

const char* kTf215 = R"({"loss": {"class_name": "SparseCategoricalCrossentropy", "config":
  {"reduction": "auto", "name": "sparse_categorical_crossentropy", "from_logits": false,
   "ignore_class": null}},
  "metrics": [[{"class_name": "MeanMetricWrapper", "config": {"name": "accuracy",
   "dtype": "float32", "fn": "sparse_categorical_accuracy"}}]],
  "weighted_metrics": null, "loss_weights": null,
  "optimizer_config": {"class_name": "Custom>Adam", "config": {"name": "Adam",
   "weight_decay": null, "clipnorm": null, "global_clipnorm": null, "clipvalue": null,
   "use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null, "jit_compile": true,
   "is_legacy_optimizer": false, "learning_rate": 0.0005, "beta_1": 0.9, "beta_2": 0.999,
   "epsilon": 1e-07, "amsgrad": false}}})";

const char* kSynthetic =
    R"('{"type": "synthetic", "samples": 256, "x_shape": [28, 28], "task": "classes", )"
    R"("classes": 10, "seed": 3}')";

struct KerasImportCli : ::testing::Test {
  void SetUp() override {
    dir = test::scratch_dir("keras-import");
    auto r = run_command(test::tandem_cli() + " train --set epochs=1 --set data.train=" +
                         kSynthetic + " --run-dir " + (dir / "run").string() + " -q");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    model = dir / "run" / "model.h5";
    test::write_text(dir / "set_attr.py", kSetAttr);
  }
  void set_attr(const std::string& name, const std::string& value) {
    auto r = run_command(std::string(test::system_python()) + " " +
                         (dir / "set_attr.py").string() + " " + model.string() + " " + name +
                         " '" + value + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  test::CommandResult import(const std::string& extra = "") {
    return run_command(test::tandem_cli() + " import " + model.string() + " -o " +
                       (dir / "imported.json").string() + extra);
  }
  fs::path dir, model;
};

TEST_F(KerasImportCli, ATensorFlow215FileBecomesARunConfigThatTrainsFromItsWeights) {
  set_attr("training_config", kTf215);
  auto r = import(" --set data.train=" + std::string(kSynthetic) + " --set epochs=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("Sequential model 'fashion_mlp', 235,146 parameters"), std::string::npos)
      << r.err;
  std::ifstream in(dir / "imported.json");
  const json config = json::parse(in);
  EXPECT_EQ(config["name"], "model");
  EXPECT_EQ(config["model"]["class_name"], "Sequential");
  EXPECT_EQ(config["optimizer"]["class_name"], "Adam");
  EXPECT_EQ(config["optimizer"]["config"]["learning_rate"], 0.0005);
  EXPECT_EQ(config["loss"]["class_name"], "SparseCategoricalCrossentropy");
  EXPECT_EQ(config["metrics"], json::array({"accuracy"}));
  // It trains, starting from the file's weights.
  auto fresh = run_command(test::tandem_cli() + " train " + (dir / "imported.json").string() +
                           " --weights " + model.string() + " --run-dir " +
                           (dir / "again").string() + " -q");
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
}

// An optimizer compiled with a learning rate schedule, as tf.keras 2.15 saves it: imported as it
// is, and the run follows it (each step's rate in the events, the update after t updates at
// the rate of t). It was refused: "expected a number, got an object".
TEST_F(KerasImportCli, AnOptimizersLearningRateScheduleImportsAndTrains) {
  json training = json::parse(kTf215);
  training["optimizer_config"]["config"]["learning_rate"] = json::parse(
      R"({"module": "keras.optimizers.schedules", "class_name": "ExponentialDecay",
          "config": {"initial_learning_rate": 0.001, "decay_steps": 4, "decay_rate": 0.5,
          "staircase": true, "name": null}, "registered_name": null})");
  set_attr("training_config", training.dump());
  auto r = import(" --set data.train=" + std::string(kSynthetic) + " --set epochs=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json config = json::parse(test::read_text(dir / "imported.json"));
  EXPECT_EQ(config["optimizer"]["config"]["learning_rate"]["class_name"], "ExponentialDecay");
  auto t = run_command(test::tandem_cli() + " train " + (dir / "imported.json").string() +
                       " --set batch_size=32 --run-dir " + (dir / "scheduled").string() + " -q");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  int steps = 0;
  std::istringstream events(test::read_text(dir / "scheduled" / "events.jsonl"));
  for (std::string line; std::getline(events, line);)
    if (const json e = json::parse(line); e["event"] == "batch_ended") {
      ++steps;  // after `steps` updates the next one's rate: 0.001 · 0.5^floor(steps / 4)
      EXPECT_DOUBLE_EQ(e["lr"].get<double>(), 0.001 * std::pow(0.5, steps / 4)) << steps;
    }
  EXPECT_EQ(steps, 8);  // 256 samples in batches of 32
}

// A metric saved as its class keeps its settings (k, thresholds) and its name: only TensorFlow's
// MeanMetricWrapper, the form of compile(metrics=["accuracy"]), becomes a name. They used to
// become their names, so k=3 computed k=5 and a renamed one was refused.
TEST_F(KerasImportCli, MetricClassesKeepTheirSettingsAndNames) {
  json training = json::parse(kTf215);
  training["metrics"] = json::parse(
      R"([[{"class_name": "SparseTopKCategoricalAccuracy", "config": {"name": "top3",
            "dtype": "float32", "k": 3}},
           {"class_name": "MeanMetricWrapper", "config": {"name": "accuracy",
            "dtype": "float32", "fn": "sparse_categorical_accuracy"}}]])");
  set_attr("training_config", training.dump());
  auto r = import(" --set data.train=" + std::string(kSynthetic));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir / "imported.json");
  const json config = json::parse(in);
  ASSERT_EQ(config["metrics"].size(), 2u) << config["metrics"].dump();
  EXPECT_EQ(config["metrics"][0]["class_name"], "SparseTopKCategoricalAccuracy");
  EXPECT_EQ(config["metrics"][0]["config"]["k"], 3);
  EXPECT_EQ(config["metrics"][1], "accuracy");
  auto ev = run_command(test::tandem_cli() + " evaluate " + (dir / "imported.json").string() +
                        " --weights " + model.string() + " --split train -q");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  const json logs = json::parse(ev.out);
  ASSERT_TRUE(logs.contains("top3")) << logs.dump();
  EXPECT_GE(logs["top3"].get<double>(), logs["accuracy"].get<double>());
}

// Tandem's own checkpoints carry Keras' training_config (what compile() was given), so that
// Keras' load_model compiles the model and `tandem import` gets the loss, optimizer and metrics
// back (they used to be lost).
TEST_F(KerasImportCli, ATandemCheckpointImportsWithItsCompileSettings) {
  const json run = json::parse(test::read_text(dir / "run" / "config.json"));
  auto r = import(" --set data.train=" + std::string(kSynthetic));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json config = json::parse(test::read_text(dir / "imported.json"));
  EXPECT_EQ(config["loss"], run["loss"]);
  EXPECT_EQ(config["metrics"], run["metrics"]);
  ASSERT_TRUE(config["optimizer"].is_object()) << config.dump();
  EXPECT_EQ(config["optimizer"]["class_name"], "Adam");
  // As h5py (and Keras) read it: a JSON string attribute at the root.
  auto py = run_command(std::string(test::system_python()) +
                        " -c 'import h5py, json, sys; f = h5py.File(sys.argv[1], \"r\"); "
                        "t = json.loads(f.attrs[\"training_config\"]); "
                        "print(t[\"optimizer_config\"][\"class_name\"], t[\"loss\"])' " +
                        model.string());
  ASSERT_EQ(py.exit_code, 0) << py.err;
  EXPECT_NE(py.out.find("Adam"), std::string::npos) << py.out;
}

// -o naming the model file it reads would replace the model with its config.
TEST_F(KerasImportCli, TheOutputCannotBeTheModelItReads) {
  const std::string before = test::read_text(model);
  auto r = run_command(test::tandem_cli() + " import " + model.string() + " -o " +
                       (model.parent_path() / "." / model.filename()).string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("is the input file"), std::string::npos) << r.err;
  EXPECT_EQ(test::read_text(model), before);
  r = run_command(test::tandem_cli() + " export " + model.string() + " -o " + model.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(test::read_text(model), before);
  // '-' is stdout (it wrote a file named '-'), as predict's.
  r = run_command("cd " + dir.string() + " && " + test::tandem_cli() + " import " + model.string() +
                  " -o -");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["model"]["class_name"], "Sequential");
  EXPECT_FALSE(fs::exists(dir / "-"));
}

TEST_F(KerasImportCli, Keras2LegacyOptimizerKeysComeThroughWithWarnings) {
  set_attr("training_config",
           R"({"loss": "sparse_categorical_crossentropy", "metrics": ["acc"],
               "optimizer_config": {"class_name": "SGD", "config": {"lr": 0.01, "decay": 1e-6,
               "momentum": 0.9, "nesterov": true}}})");
  auto r = import();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("optimizer.config.lr: Keras 2's name for the learning rate"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("optimizer.config.decay: Keras 2's time-based learning rate decay"),
            std::string::npos)
      << r.err;
  // Without data the config is written, and the warning says what to add.
  EXPECT_NE(r.err.find("the file does not say data.train"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "imported.json"));
}

TEST_F(KerasImportCli, WeightedMetricsComeThroughAndAreLoggedUnderKerasNames) {
  json training = json::parse(kTf215);
  training["weighted_metrics"] = training["metrics"];
  set_attr("training_config", training.dump());
  auto r = import(" --set data.train=" + std::string(kSynthetic) + " --set epochs=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir / "imported.json");
  const json config = json::parse(in);
  EXPECT_EQ(config["weighted_metrics"], json::array({"accuracy"}));
  auto ev = run_command(test::tandem_cli() + " evaluate " + (dir / "imported.json").string() +
                        " --weights " + model.string() + " --split train -q");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  const json logs = json::parse(ev.out);
  // Without sample weights every weight is 1: the weighted mean is the plain one.
  ASSERT_TRUE(logs.contains("weighted_accuracy")) << logs.dump();
  EXPECT_EQ(logs["weighted_accuracy"], logs["accuracy"]);
}

// Import reads the configs only: a file whose weights cannot be read (4 GiB declared, never
// written; or crafted to allocate gigabytes) imports, and the weights' error waits for
// --weights, which reads them.
TEST_F(KerasImportCli, ImportReadsTheConfigsNotTheWeights) {
  const auto r = run_command(std::string(test::system_python()) +
                             " -c \"import h5py,sys; f=h5py.File(sys.argv[1],'r+'); "
                             "p='model_weights/dense/dense/kernel:0'; del f[p]; "
                             "f.create_dataset(p, shape=(1 << 30,), dtype='f4', "
                             "chunks=(1 << 20,))\" " +
                             model.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto imported = import(" --set data.train=" + std::string(kSynthetic));
  EXPECT_EQ(imported.exit_code, 0) << imported.err;
  auto trained = run_command(test::tandem_cli() + " train " + (dir / "imported.json").string() +
                             " --weights " + model.string() + " --run-dir " +
                             (dir / "again").string() + " -q");
  EXPECT_EQ(trained.exit_code, 2) << trained.err;
  EXPECT_NE(trained.err.find("/model_weights/dense/dense/kernel:0"), std::string::npos)
      << trained.err;
}

TEST_F(KerasImportCli, WhatCannotBeImportedIsExitCode2AndWritesNothing) {
  const auto refused = [&](const std::string& expected) {
    fs::remove(dir / "imported.json");
    auto r = import();
    EXPECT_EQ(r.exit_code, 2) << expected << "\n" << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "imported.json")) << expected;
  };
  // With the data still to add, the rest is checked all the same (it was written, exit 0).
  set_attr("training_config", kTf215);
  fs::remove(dir / "imported.json");
  const auto bad_epochs = import(" --set epochs=-5");
  EXPECT_EQ(bad_epochs.exit_code, 2) << bad_epochs.err;
  EXPECT_NE(bad_epochs.err.find("at 'epochs': expected an integer from 1"), std::string::npos)
      << bad_epochs.err;
  EXPECT_FALSE(fs::exists(dir / "imported.json"));
  set_attr("training_config", R"({"loss": "focal_loss", "optimizer_config": "adam"})");
  refused(model.string() +
          ": its training_config does not import: config error at 'loss': unknown loss "
          "'focal_loss'");
  set_attr("training_config", R"({"loss": "mse", "metrics": [["auc_roc"]],
                                  "optimizer_config": "adam"})");
  refused("'metrics[0]'");
  set_attr("training_config", "{not json");
  refused("training_config");
  set_attr("training_config", kTf215);
  json layer_nested = json::parse(
      run_command(std::string(test::system_python()) +
                  " -c \"import h5py,sys; a=h5py.File(sys.argv[1]).attrs['model_config']; "
                  "print(a if isinstance(a, str) else a.decode())\" " +
                  model.string())
          .out);
  layer_nested["config"]["layers"][0]["class_name"] = "Lambda";
  set_attr("model_config", layer_nested.dump());
  refused(model.string() +
          ": its model_config does not import: config error at "
          "'model.config.layers[0].class_name'");
  set_attr("-", "model_config");
  refused("holds weights but no model_config");
  test::write_text(model, "not hdf5");
  refused("not an HDF5 file");
  // A Keras 3 .keras archive is read (tests/e2e/keras3_files_cli_test.cpp): its config.json is
  // checked as a model_config is; a zip without one is named for what it is not.
  const auto zip_with = [&](const std::string& member) {
    ASSERT_EQ(run_command(std::string(test::system_python()) +
                          " -c \"import sys, zipfile; zipfile.ZipFile(sys.argv[1], 'w')"
                          ".writestr('" +
                          member + "', '{}')\" " + model.string())
                  .exit_code,
              0);
  };
  zip_with("config.json");
  refused(model.string() + ": its config.json does not import: config error at 'model.class_name'");
  zip_with("a.json");
  refused("cannot read '" + model.string() +
          "': a zip archive, but not a Keras .keras file: it has no config.json (it has "
          "'a.json')");
}

}  // namespace
}  // namespace tandem
