// A functional model (Keras 2.15's to_json() of a residual MLP, pasted unchanged into a run
// config) through the `tandem` binary: summary, training, a checkpoint h5py reads as Keras
// writes functional models, and --resume landing on the bits of an uninterrupted run.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// x = Input((16,)); h = Dense(16, "relu")(x); s = Add()([h, x]); c = Concatenate()([s, h]);
// y = Dense(1, "sigmoid")(c)
const char* kModel = R"({"class_name": "Functional", "config": {"name": "residual_mlp",
  "trainable": true, "layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 16], "dtype": "float32",
   "sparse": false, "ragged": false, "name": "features"}, "name": "features", "inbound_nodes": []},
  {"class_name": "Dense", "config": {"name": "hidden", "trainable": true, "dtype": "float32",
   "units": 16, "activation": "relu", "use_bias": true}, "name": "hidden",
   "inbound_nodes": [[["features", 0, 0, {}]]]},
  {"class_name": "Add", "config": {"name": "skip", "trainable": true, "dtype": "float32"},
   "name": "skip", "inbound_nodes": [[["hidden", 0, 0, {}], ["features", 0, 0, {}]]]},
  {"class_name": "Concatenate", "config": {"name": "join", "trainable": true, "dtype": "float32",
   "axis": -1}, "name": "join", "inbound_nodes": [[["skip", 0, 0, {}], ["hidden", 0, 0, {}]]]},
  {"class_name": "Dense", "config": {"name": "out", "trainable": true, "dtype": "float32",
   "units": 1, "activation": "sigmoid", "use_bias": true}, "name": "out",
   "inbound_nodes": [[["join", 0, 0, {}]]]}],
  "input_layers": [["features", 0, 0]], "output_layers": [["out", 0, 0]]},
  "keras_version": "2.15.0", "backend": "tensorflow"})";

fs::path write_run_config(const fs::path& folder) {
  const json run = {
      {"name", "functional"}, {"seed", 5}, {"epochs", 2}, {"batch_size", 64},
      {"optimizer", "adam"}, {"loss", "binary_crossentropy"}, {"metrics", {"accuracy"}},
      {"model", json::parse(kModel)},
      {"data",
       {{"train", {{"type", "synthetic"}, {"samples", 1024}, {"x_shape", {16}}, {"task", "binary"},
                   {"seed", 9}}}}}};
  fs::create_directories(folder);
  const fs::path path = folder / "run.json";
  std::ofstream(path) << run.dump(2);
  return path;
}

TEST(FunctionalCli, SummaryTrainCheckpointAndBitwiseResume) {
  const fs::path root = test::scratch_dir("functional-cli");
  const fs::path config = write_run_config(root);
  const std::string cli = test::tandem_cli();

  auto summary = run_command(cli + " summary " + config.string());
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_NE(summary.out.find("Connected to"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("['hidden[0][0]',"), std::string::npos) << summary.out;

  // Two epochs straight, and one epoch then a resume to two: the same bits.
  auto whole = run_command(cli + " train " + config.string() + " --run-dir " +
                           (root / "whole").string() + " -q");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto first = run_command(cli + " train " + config.string() + " --set epochs=1 --run-dir " +
                           (root / "split").string() + " -q");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto resumed = run_command(cli + " train --resume " + (root / "split/model.h5").string() +
                             " --set epochs=2 -q");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;

  // h5py reads both as Keras' functional layout, and their weights are equal bit for bit.
  const std::string check = std::string(test::system_python()) + " -c '\n"
      "import h5py, json, sys, numpy as np\n"
      "a, b = (h5py.File(p, \"r\") for p in sys.argv[1:])\n"
      "config = json.loads(a.attrs[\"model_config\"])\n"
      "assert config[\"class_name\"] == \"Functional\", config[\"class_name\"]\n"
      "names = [n.decode() for n in a[\"model_weights\"].attrs[\"layer_names\"]]\n"
      "assert names == [\"features\", \"hidden\", \"skip\", \"join\", \"out\"], names\n"
      "inbound = config[\"config\"][\"layers\"][2][\"inbound_nodes\"]\n"
      "assert inbound == [[[\"hidden\", 0, 0, {}], [\"features\", 0, 0, {}]]], inbound\n"
      "for layer in (\"hidden\", \"out\"):\n"
      "  for w in (\"kernel:0\", \"bias:0\"):\n"
      "    x = a[\"model_weights\"][layer][layer][w][()]\n"
      "    y = b[\"model_weights\"][layer][layer][w][()]\n"
      "    assert x.tobytes() == y.tobytes(), (layer, w, float(np.abs(x - y).max()))\n"
      "print(\"ok\")\n' " +
      (root / "whole/model.h5").string() + " " + (root / "split/model.h5").string();
  auto checked = run_command(check);
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_NE(checked.out.find("ok"), std::string::npos) << checked.out << checked.err;
}

}  // namespace
}  // namespace tandem
