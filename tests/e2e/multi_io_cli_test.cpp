// A functional model with two inputs and two outputs through the `tandem` binary, fed from an
// HDF5 file with one dataset per input and per output (written by h5py): per-output losses and
// loss_weights, each output's loss and metrics in the history under Keras 2's names (with val_),
// the loss the weighted sum of the outputs' losses, predictions packed per sample in output
// order, cpu:3 training to the weights of cpu:1; and what the data or config can get wrong,
// refused with exit code 2 and the place named.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// tokens (8 ids of 6) and a flag per sample; the class is whether token 0 appears again, the
// value the mean of the ids scaled, so both heads have something to learn.
constexpr const char* kWriteData = R"PY(
import sys, h5py, numpy as np
rng = np.random.default_rng(4)
n = 240
tokens = rng.integers(0, 6, size=(n, 8))
flag = rng.random((n, 2)).astype(np.float32)
label = (tokens[:, 1:] == tokens[:, :1]).any(axis=1).astype(np.int64)
value = (tokens.mean(axis=1, keepdims=True) / 5.0).astype(np.float32)
with h5py.File(sys.argv[1], "w") as f:
    f["tokens"] = tokens.astype(np.int32)
    f["flag"] = flag
    f["label"] = label
    f["value"] = value
)PY";

// tokens -> Embedding 6x4 -> Flatten -> Dense 8 relu; [that, flag] -> Dense 2 "repeat" (logits);
// Dense 8 -> Dense 1 "mean". Keras 2.15's to_json() form.
constexpr const char* kModel = R"({"class_name": "Functional", "config": {"name": "two_heads",
  "trainable": true, "layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 8], "dtype": "float32",
   "name": "tokens"}, "name": "tokens", "inbound_nodes": []},
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 2], "dtype": "float32",
   "name": "flag"}, "name": "flag", "inbound_nodes": []},
  {"class_name": "Embedding", "config": {"name": "embed", "input_dim": 6, "output_dim": 4},
   "name": "embed", "inbound_nodes": [[["tokens", 0, 0, {}]]]},
  {"class_name": "Flatten", "config": {"name": "flat"}, "name": "flat",
   "inbound_nodes": [[["embed", 0, 0, {}]]]},
  {"class_name": "Dense", "config": {"name": "hidden", "units": 8, "activation": "relu"},
   "name": "hidden", "inbound_nodes": [[["flat", 0, 0, {}]]]},
  {"class_name": "Concatenate", "config": {"name": "join", "axis": -1}, "name": "join",
   "inbound_nodes": [[["hidden", 0, 0, {}], ["flag", 0, 0, {}]]]},
  {"class_name": "Dense", "config": {"name": "repeat", "units": 2}, "name": "repeat",
   "inbound_nodes": [[["join", 0, 0, {}]]]},
  {"class_name": "Dense", "config": {"name": "mean", "units": 1}, "name": "mean",
   "inbound_nodes": [[["hidden", 0, 0, {}]]]}],
  "input_layers": [["tokens", 0, 0], ["flag", 0, 0]],
  "output_layers": [["repeat", 0, 0], ["mean", 0, 0]]},
  "keras_version": "2.15.0", "backend": "tensorflow"})";

json run_config(const fs::path& data) {
  return {{"name", "two-heads"},
          {"seed", 3},
          {"epochs", 2},
          {"batch_size", 32},
          {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
          {"loss",
           {{"repeat",
             {{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}},
            {"mean", "mse"}}},
          {"loss_weights", {{"repeat", 1.0}, {"mean", 0.5}}},
          {"metrics", {{"repeat", {"accuracy"}}}},
          {"model", json::parse(kModel)},
          {"data",
           {{"train",
             {{"type", "hdf5"},
              {"path", data.string()},
              {"x", {"tokens", "flag"}},
              {"y", {"label", "value"}}}},
            {"validation_split", 0.25}}}};
}

fs::path write_config(const fs::path& dir, const json& config) {
  const fs::path path = dir / "run.json";
  std::ofstream(path) << config.dump(2);
  return path;
}


struct MultiIoCli : ::testing::Test {
  void SetUp() override {
    dir = test::scratch_dir("multi-io-cli");
    data = dir / "two.h5";
    auto w = test::run_python(dir / "write.py", kWriteData, data.string());
    ASSERT_EQ(w.exit_code, 0) << w.err;
  }
  fs::path dir, data;
};

TEST_F(MultiIoCli, TrainsReportsEachOutputAndPredictsPacked) {
  const fs::path config = write_config(dir, run_config(data));
  const std::string cli = test::tandem_cli();
  auto summary = run_command(cli + " summary " + config.string());
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_NE(summary.out.find(" flag (InputLayer)"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("'flag[0][0]'"), std::string::npos) << summary.out;

  auto one = run_command(cli + " train " + config.string() + " --run-dir " +
                         (dir / "one").string() + " -q");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto three = run_command(cli + " train " + config.string() + " --set devices=cpu:3 --run-dir " +
                           (dir / "three").string() + " -q");
  ASSERT_EQ(three.exit_code, 0) << three.err;

  const json history = test::run_history(dir / "one");
  ASSERT_EQ(history.size(), 2u) << history.dump();
  for (const char* key : {"loss", "repeat_loss", "mean_loss", "repeat_accuracy", "val_loss",
                          "val_repeat_loss", "val_mean_loss", "val_repeat_accuracy"})
    EXPECT_TRUE(history[1].contains(key)) << key << " missing from " << history[1].dump();
  for (const json& epoch : history) {
    // Keras' total: the weighted sum of the outputs' losses (means over the same samples).
    EXPECT_NEAR(epoch["val_loss"].get<double>(),
                epoch["val_repeat_loss"].get<double>() + 0.5 * epoch["val_mean_loss"].get<double>(),
                1e-5);
  }
  EXPECT_LT(history[1]["loss"].get<double>(), history[0]["loss"].get<double>()) << history.dump();
  // The device layout does not show in the result (contract 1).
  const json again = test::run_history(dir / "three");
  ASSERT_EQ(again.size(), 2u);
  EXPECT_NEAR(again[1]["val_loss"].get<double>(), history[1]["val_loss"].get<double>(), 1e-5);

  // predict: a row per sample, the outputs' 2 + 1 values in output order.
  auto predicted = run_command(cli + " predict " + (dir / "one" / "config.json").string() +
                               " --weights " + (dir / "one" / "model.h5").string());
  ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
  std::istringstream rows(predicted.out);
  std::string row;
  int count = 0;
  while (std::getline(rows, row)) {
    if (row.empty()) continue;
    ++count;
    EXPECT_EQ(std::count(row.begin(), row.end(), ','), 2) << row;
  }
  EXPECT_EQ(count, 60);  // the validation quarter of 240

  // h5py reads the checkpoint's config with both inputs and outputs.
  auto checked = run_command(std::string(test::system_python()) +
                             " -c 'import h5py, json, sys; c = json.loads(h5py.File(sys.argv[1], "
                             "\"r\").attrs[\"model_config\"]); print(c[\"config\"][\"input_layers\"]"
                             ", c[\"config\"][\"output_layers\"])' " +
                             (dir / "one" / "model.h5").string());
  ASSERT_EQ(checked.exit_code, 0) << checked.err;
  EXPECT_NE(checked.out.find("[['tokens', 0, 0], ['flag', 0, 0]] [['repeat', 0, 0], ['mean', 0, 0]]"),
            std::string::npos)
      << checked.out;
}

TEST_F(MultiIoCli, DataAndConfigThatDoNotFitAreRefusedWithTheirPlace) {
  const std::string cli = test::tandem_cli();
  const auto refused = [&](json config, const std::string& expected) {
    const fs::path path = write_config(dir, config);
    auto r = run_command(cli + " train " + path.string() + " --run-dir " + (dir / "bad").string() +
                         " -q");
    EXPECT_EQ(r.exit_code, 2) << expected << "\n" << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "bad")) << expected;
  };
  json one_input = run_config(data);
  one_input["data"]["train"]["x"] = "tokens";
  refused(one_input, "samples of shape (None, 8) but model 'two_heads' expects (None, 10) (its 2 "
                     "inputs packed)");
  json swapped = run_config(data);
  swapped["data"]["train"]["x"] = {"flag", "tokens"};
  refused(swapped, "input array 0 has samples of shape (None, 2) but input 'tokens' expects "
                   "(None, 8)");
  json three = run_config(data);
  three["data"]["train"]["x"] = {"tokens", "flag", "flag"};
  refused(three, "has 3 input arrays, but model 'two_heads' has 2 inputs");
  json no_value = run_config(data);
  no_value["data"]["train"]["y"] = {"label"};
  refused(no_value,
          "targets of shape (None,) for the model's 2 outputs, which take 2 values per "
          "sample, packed (repeat: 1, mean: 1)");
  json missing = run_config(data);
  missing["data"]["train"]["x"] = {"tokens", "flags"};
  refused(missing, "no dataset 'flags'");
  json not_a_name = run_config(data);
  not_a_name["data"]["train"]["y"] = {"label", 3};
  refused(not_a_name, "data.train.y[1]': expected a dataset name, got 3");
  json bad_weight = run_config(data);
  bad_weight["loss_weights"] = {{"mean", "half"}};
  refused(bad_weight, "loss_weights.mean': expected a finite weight >= 0");
  json unknown_output = run_config(data);
  unknown_output["loss"]["means"] = "mse";
  refused(unknown_output, "loss.means': the model has no output 'means'");
  json class_weight = run_config(data);
  class_weight["class_weight"] = {{"1", 2.0}};
  refused(class_weight, "class_weight': is for a model with one output (as in Keras), but model "
                        "'two_heads' has 2");
  json weighted_metrics = run_config(data);
  weighted_metrics["weighted_metrics"] = {{"means", {"mae"}}};
  refused(weighted_metrics, "weighted_metrics.means': the model has no output 'means'");
}

}  // namespace
}  // namespace tandem
