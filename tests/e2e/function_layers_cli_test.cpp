// Functional models that call functions on Keras tensors — tf.keras 2's to_json() with TFOpLambda
// entries for `h + x`, `s * 0.5`, `tf.concat([m, h], -1)`, and Keras 3's with operation entries
// for `h + x`, `0.5 * s`, `keras.ops.concatenate([m, h], -1)`, pasted unchanged into a run config
// — through the `tandem` binary: each trains (saying which layers the functions run as) on one
// replica and on two to the same weights, its checkpoint holds the layers (h5py), it resumes, and
// `tandem predict` gives what NumPy computes from the checkpoint's weights.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// x = Input((8,)); h = Dense(8, "relu")(x); s = h + x; m = s * 0.5;
// c = tf.concat([m, h], -1); y = Dense(1, "sigmoid")(c)
const char* kModel = R"({"class_name": "Functional", "config": {"name": "model",
  "trainable": true, "layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 8], "dtype": "float32",
   "sparse": false, "ragged": false, "name": "x"}, "name": "x", "inbound_nodes": []},
  {"class_name": "Dense", "config": {"name": "h", "trainable": true, "dtype": "float32",
   "units": 8, "activation": "relu", "use_bias": true}, "name": "h",
   "inbound_nodes": [[["x", 0, 0, {}]]]},
  {"class_name": "TFOpLambda", "config": {"name": "tf.__operators__.add", "trainable": true,
   "dtype": "float32", "function": "__operators__.add"}, "name": "tf.__operators__.add",
   "inbound_nodes": [["h", 0, 0, {"y": ["x", 0, 0], "name": null}]]},
  {"class_name": "TFOpLambda", "config": {"name": "tf.math.multiply", "trainable": true,
   "dtype": "float32", "function": "math.multiply"}, "name": "tf.math.multiply",
   "inbound_nodes": [["tf.__operators__.add", 0, 0, {"y": 0.5, "name": null}]]},
  {"class_name": "TFOpLambda", "config": {"name": "tf.concat", "trainable": true,
   "dtype": "float32", "function": "concat"}, "name": "tf.concat",
   "inbound_nodes": [[["tf.math.multiply", 0, 0, {"axis": -1, "name": null}],
                      ["h", 0, 0, {"axis": -1, "name": null}]]]},
  {"class_name": "Dense", "config": {"name": "out", "trainable": true, "dtype": "float32",
   "units": 1, "activation": "sigmoid", "use_bias": true}, "name": "out",
   "inbound_nodes": [[["tf.concat", 0, 0, {}]]]}],
  "input_layers": [["x", 0, 0]], "output_layers": [["out", 0, 0]]},
  "keras_version": "2.15.0", "backend": "tensorflow"})";

// The same model as Keras 3's to_json() writes it: x = Input((8,)); h = Dense(8, "relu")(x);
// s = h + x; m = 0.5 * s; c = ops.concatenate([m, h], -1); y = Dense(1, "sigmoid")(c)
json keras3_model() {
  const auto tensor = [](const char* layer, int width) {
    return json{
        {"class_name", "__keras_tensor__"},
        {"config",
         {{"shape", {nullptr, width}}, {"dtype", "float32"}, {"keras_history", {layer, 0, 0}}}}};
  };
  const auto node = [](json args) {
    return json::array({{{"args", std::move(args)}, {"kwargs", json::object()}}});
  };
  const auto dense = [&](const char* name, int units, const char* activation, json input) {
    return json{{"module", "keras.layers"},
                {"class_name", "Dense"},
                {"config",
                 {{"name", name},
                  {"trainable", true},
                  {"units", units},
                  {"activation", activation},
                  {"use_bias", true}}},
                {"registered_name", nullptr},
                {"name", name},
                {"inbound_nodes", node(json::array({std::move(input)}))}};
  };
  const auto operation = [&](const char* cls, const char* name, json args, json config) {
    config["name"] = name;
    return json{{"module", "keras.src.ops.numpy"},
                {"class_name", cls},
                {"config", std::move(config)},
                {"registered_name", cls},
                {"name", name},
                {"inbound_nodes", node(std::move(args))}};
  };
  const json layers = {
      {{"module", "keras.layers"},
       {"class_name", "InputLayer"},
       {"config",
        {{"batch_shape", {nullptr, 8}}, {"dtype", "float32"}, {"sparse", false}, {"name", "x"}}},
       {"registered_name", nullptr},
       {"name", "x"},
       {"inbound_nodes", json::array()}},
      dense("h", 8, "relu", tensor("x", 8)),
      operation("Add", "add", {tensor("h", 8), tensor("x", 8)}, json::object()),
      operation("Multiply", "multiply", {0.5, tensor("add", 8)}, json::object()),
      operation("Concatenate", "concatenate", {{tensor("multiply", 8), tensor("h", 8)}},
                {{"axis", -1}}),
      dense("out", 1, "sigmoid", tensor("concatenate", 16))};
  return {{"module", "keras"},
          {"class_name", "Functional"},
          {"config",
           {{"name", "model"},
            {"trainable", true},
            {"layers", layers},
            {"input_layers", {"x", 0, 0}},
            {"output_layers", {"out", 0, 0}}}},
          {"registered_name", "Functional"}};
}

// `model` trained, resumed and predicting under `tag`'s scratch folder; `warning` a part of what
// train says; `add`, `multiply`, `concat` the function entries' names.
void train_resume_and_predict(const std::string& tag, const json& model, const std::string& warning,
                              const std::string& add, const std::string& multiply,
                              const std::string& concat) {
  const fs::path root = test::scratch_dir(tag);

  // Data: x uniform in [-1, 1], y = (sum of x > 0).
  auto made = test::run_python(root / "data.py",
                               "import numpy as np, sys\n"
                               "r = np.random.default_rng(3)\n"
                               "for name, n in ((\"train\", 512), (\"val\", 64)):\n"
                               "  x = r.uniform(-1, 1, (n, 8)).astype(np.float32)\n"
                               "  y = (x.sum(1, keepdims=True) > 0).astype(np.float32)\n"
                               "  np.savez(sys.argv[1] + \"/\" + name + \".npz\", x=x, y=y)\n",
                               root.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const json run = {{"name", "tf-functions"},
                    {"seed", 5},
                    {"epochs", 2},
                    {"batch_size", 32},
                    {"optimizer", "adam"},
                    {"loss", "binary_crossentropy"},
                    {"metrics", {"accuracy"}},
                    {"model", model},
                    {"data",
                     {{"train", {{"type", "npz"}, {"path", (root / "train.npz").string()}}},
                      {"validation", {{"type", "npz"}, {"path", (root / "val.npz").string()}}}}}};
  const fs::path config = root / "run.json";
  test::write_text(config, run.dump(2));
  const std::string cli = test::tandem_cli();

  auto one = run_command(cli + " train " + config.string() + " --run-dir " +
                         (root / "one").string() + " -q");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.err.find(warning), std::string::npos) << one.err;
  auto two = run_command(cli + " train " + config.string() + " --devices cpu:2 --run-dir " +
                         (root / "two").string() + " -q");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto resumed = run_command(cli + " train --resume " + (root / "one/model.h5").string() +
                             " --set epochs=3 --run-dir " + (root / "resumed").string() + " -q");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  auto predicted =
      run_command(cli + " predict " + config.string() + " --weights " +
                  (root / "one/model.h5").string() + " -o " + (root / "p.npy").string());
  ASSERT_EQ(predicted.exit_code, 0) << predicted.err;

  // The checkpoint's model_config holds the layers under the functions' names; one replica and
  // two trained to the same weights; predict is NumPy's arithmetic on those weights.
  auto checked = test::run_python(
      root / "check.py",
      "import h5py, json, sys, numpy as np\n"
      "root, add, multiply, concat = sys.argv[1:]\n"
      "a, b = (h5py.File(root + p, \"r\") for p in (\"/one/model.h5\", \"/two/model.h5\"))\n"
      "config = json.loads(a.attrs[\"model_config\"])\n"
      "classes = {l[\"name\"]: l[\"class_name\"] for l in config[\"config\"][\"layers\"]}\n"
      "assert classes[add] == \"Add\", classes\n"
      "assert classes[multiply] == \"Rescaling\", classes\n"
      "assert classes[concat] == \"Concatenate\", classes\n"
      "w = lambda f, l, n: f[\"model_weights\"][l][l][n + \":0\"][()]\n"
      "for l in (\"h\", \"out\"):\n"
      "  for n in (\"kernel\", \"bias\"):\n"
      "    x, y = w(a, l, n), w(b, l, n)\n"
      "    assert np.abs(x - y).max() <= 1e-5 * np.abs(x).max(), (l, n)\n"
      "x = np.load(root + \"/val.npz\")[\"x\"].astype(np.float64)\n"
      "h = np.maximum(x @ w(a, \"h\", \"kernel\") + w(a, \"h\", \"bias\"), 0)\n"
      "c = np.concatenate([(h + x) * 0.5, h], -1)\n"
      "y = 1 / (1 + np.exp(-(c @ w(a, \"out\", \"kernel\") + w(a, \"out\", \"bias\"))))\n"
      "p = np.load(root + \"/p.npy\")\n"
      "assert p.shape == y.shape, (p.shape, y.shape)\n"
      "assert np.abs(p - y).max() <= 1e-5, np.abs(p - y).max()\n"
      "print(\"ok\")\n",
      root.string() + " " + add + " " + multiply + " " + concat);
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_NE(checked.out.find("ok"), std::string::npos) << checked.out << checked.err;
}

TEST(FunctionLayersCli, TfKerasTwoFunctionsTrainCheckpointAndPredict) {
  train_resume_and_predict("tf-function-cli", json::parse(kModel),
                           "run as the Keras layers that compute them: tf.__operators__.add as "
                           "Add, tf.math.multiply as Rescaling, tf.concat as Concatenate",
                           "tf.__operators__.add", "tf.math.multiply", "tf.concat");
}

TEST(FunctionLayersCli, KerasThreeOperationsTrainCheckpointAndPredict) {
  train_resume_and_predict("keras3-operation-cli", keras3_model(),
                           "run as the Keras layers that compute them: keras.src.ops.numpy.Add as "
                           "Add, keras.src.ops.numpy.Multiply as Rescaling, "
                           "keras.src.ops.numpy.Concatenate as Concatenate",
                           "add", "multiply", "concatenate");
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
