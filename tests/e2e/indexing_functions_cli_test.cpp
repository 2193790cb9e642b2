// Functional models that index Keras tensors — h[:, 0] (a BERT classifier's first token),
// tf.squeeze(h[:, -1:, ::-2], 1), tf.expand_dims(c, -1) — as tf.keras 2's to_json() writes them
// (SlicingOpLambda and TFOpLambda entries) and as Keras 3's does (GetItem, Squeeze, ExpandDims
// operations), pasted unchanged into a run config, through the `tandem` binary: each trains on one
// replica and on two to the same weights, resumes, its checkpoint's model_config holds the
// functions' entries exactly as given (h5py), and `tandem predict` gives what NumPy computes from
// the checkpoint's weights.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// x = Input((6, 4)); h = Dense(8, "tanh")(x); first = h[:, 0];
// last = tf.squeeze(h[:, -1:, ::-2], axis=1); c = tf.concat([first, last], -1);
// e = tf.expand_dims(c, -1); f = Flatten()(e); y = Dense(1, "sigmoid")(f)
const char* kTfKerasModel = R"({"class_name": "Functional", "config": {"name": "model",
  "trainable": true, "layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 6, 4], "dtype": "float32",
   "sparse": false, "ragged": false, "name": "x"}, "name": "x", "inbound_nodes": []},
  {"class_name": "Dense", "config": {"name": "h", "trainable": true, "dtype": "float32",
   "units": 8, "activation": "tanh", "use_bias": true}, "name": "h",
   "inbound_nodes": [[["x", 0, 0, {}]]]},
  {"class_name": "SlicingOpLambda", "config": {"name": "tf.__operators__.getitem",
   "trainable": true, "dtype": "float32", "function": "__operators__.getitem"},
   "name": "tf.__operators__.getitem", "inbound_nodes": [["h", 0, 0, {"slice_spec":
   [{"start": null, "stop": null, "step": null}, 0]}]]},
  {"class_name": "SlicingOpLambda", "config": {"name": "tf.__operators__.getitem_1",
   "trainable": true, "dtype": "float32", "function": "__operators__.getitem"},
   "name": "tf.__operators__.getitem_1", "inbound_nodes": [["h", 0, 0, {"slice_spec":
   [{"start": null, "stop": null, "step": null}, {"start": -1, "stop": null, "step": null},
    {"start": null, "stop": null, "step": -2}]}]]},
  {"class_name": "TFOpLambda", "config": {"name": "tf.compat.v1.squeeze", "trainable": true,
   "dtype": "float32", "function": "compat.v1.squeeze"}, "name": "tf.compat.v1.squeeze",
   "inbound_nodes": [["tf.__operators__.getitem_1", 0, 0, {"axis": 1, "name": null}]]},
  {"class_name": "TFOpLambda", "config": {"name": "tf.concat", "trainable": true,
   "dtype": "float32", "function": "concat"}, "name": "tf.concat",
   "inbound_nodes": [[["tf.__operators__.getitem", 0, 0, {"axis": -1, "name": null}],
                      ["tf.compat.v1.squeeze", 0, 0, {"axis": -1, "name": null}]]]},
  {"class_name": "TFOpLambda", "config": {"name": "tf.expand_dims", "trainable": true,
   "dtype": "float32", "function": "expand_dims"}, "name": "tf.expand_dims",
   "inbound_nodes": [["tf.concat", 0, 0, {"axis": -1, "name": null}]]},
  {"class_name": "Flatten", "config": {"name": "f", "trainable": true, "dtype": "float32",
   "data_format": "channels_last"}, "name": "f", "inbound_nodes": [[["tf.expand_dims", 0, 0, {}]]]},
  {"class_name": "Dense", "config": {"name": "out", "trainable": true, "dtype": "float32",
   "units": 1, "activation": "sigmoid", "use_bias": true}, "name": "out",
   "inbound_nodes": [[["f", 0, 0, {}]]]}],
  "input_layers": [["x", 0, 0]], "output_layers": [["out", 0, 0]]},
  "keras_version": "2.15.0", "backend": "tensorflow"})";

// The same model as Keras 3's to_json() writes it: h[:, 0] and h[:, -1:, ::-2] are GetItem
// operations (slices {"class_name": "__slice__"}), keras.ops.squeeze / expand_dims operations
// with their axis in the config.
json keras3_model() {
  const auto tensor = [](const char* layer, json shape) {
    return json{
        {"class_name", "__keras_tensor__"},
        {"config",
         {{"shape", std::move(shape)}, {"dtype", "float32"}, {"keras_history", {layer, 0, 0}}}}};
  };
  const auto node = [](json args) {
    return json::array({{{"args", std::move(args)}, {"kwargs", json::object()}}});
  };
  const auto layer = [&](const char* cls, const char* name, json config, json args) {
    config["name"] = name;
    config["trainable"] = true;
    return json{{"module", "keras.layers"},   {"class_name", cls}, {"config", config},
                {"registered_name", nullptr}, {"name", name},      {"inbound_nodes", node(args)}};
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
  const auto slice = [](json start, json stop, json step) {
    return json{{"class_name", "__slice__"},
                {"config", {{"start", start}, {"stop", stop}, {"step", step}}}};
  };
  const json h = tensor("h", {nullptr, 6, 8});
  const json layers = {
      {{"module", "keras.layers"},
       {"class_name", "InputLayer"},
       {"config",
        {{"batch_shape", {nullptr, 6, 4}}, {"dtype", "float32"}, {"sparse", false}, {"name", "x"}}},
       {"registered_name", nullptr},
       {"name", "x"},
       {"inbound_nodes", json::array()}},
      layer("Dense", "h", {{"units", 8}, {"activation", "tanh"}, {"use_bias", true}},
            json::array({tensor("x", {nullptr, 6, 4})})),
      operation("GetItem", "get_item", {h, {slice(nullptr, nullptr, nullptr), 0}}, json::object()),
      operation("GetItem", "get_item_1",
                {h,
                 {slice(nullptr, nullptr, nullptr), slice(-1, nullptr, nullptr),
                  slice(nullptr, nullptr, -2)}},
                json::object()),
      operation("Squeeze", "squeeze", json::array({tensor("get_item_1", {nullptr, 1, 4})}),
                {{"axis", 1}}),
      operation("Concatenate", "concatenate",
                {{tensor("get_item", {nullptr, 8}), tensor("squeeze", {nullptr, 4})}},
                {{"axis", -1}}),
      operation("ExpandDims", "expand_dims", json::array({tensor("concatenate", {nullptr, 12})}),
                {{"axis", -1}}),
      layer("Flatten", "f", {{"data_format", "channels_last"}},
            json::array({tensor("expand_dims", {nullptr, 12, 1})})),
      layer("Dense", "out", {{"units", 1}, {"activation", "sigmoid"}, {"use_bias", true}},
            json::array({tensor("f", {nullptr, 12})}))};
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

// `model` trained on one replica and two, resumed and predicting under `tag`'s scratch folder;
// `warning` a part of what train says; `indexing` the entries that index (compared as given).
void train_resume_and_predict(const std::string& tag, const json& model, const std::string& warning,
                              const std::vector<std::string>& indexing) {
  const fs::path root = test::scratch_dir(tag);
  // Data: x uniform in [-1, 1], y = (the first step's sum > the last step's).
  auto made = test::run_python(root / "data.py",
                               "import numpy as np, sys\n"
                               "r = np.random.default_rng(4)\n"
                               "for name, n in ((\"train\", 512), (\"val\", 64)):\n"
                               "  x = r.uniform(-1, 1, (n, 6, 4)).astype(np.float32)\n"
                               "  y = (x[:, 0].sum(1) > x[:, 5].sum(1))[:, None]\n"
                               "  np.savez(sys.argv[1] + \"/\" + name + \".npz\", x=x, "
                               "y=y.astype(np.float32))\n",
                               root.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const json run = {{"name", "indexing"},
                    {"seed", 6},
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
  json given = json::object();
  for (const json& entry : model["config"]["layers"])
    if (std::find(indexing.begin(), indexing.end(), entry["name"]) != indexing.end())
      given[entry["name"].get<std::string>()] = entry;
  ASSERT_EQ(given.size(), indexing.size());
  test::write_text(root / "given.json", given.dump());
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

  auto checked = test::run_python(
      root / "check.py",
      "import h5py, json, sys, numpy as np\n"
      "root = sys.argv[1]\n"
      "a, b, c = (h5py.File(root + p, \"r\") for p in (\"/one/model.h5\", \"/two/model.h5\",\n"
      "                                                \"/resumed/model.h5\"))\n"
      "given = json.load(open(root + \"/given.json\"))\n"
      "for f in (a, c):\n"
      "  layers = {l[\"name\"]: l for l in "
      "json.loads(f.attrs[\"model_config\"])[\"config\"][\"layers\"]}\n"
      "  for name, entry in given.items():\n"
      "    assert layers[name] == entry, (name, layers[name], entry)\n"
      "w = lambda f, l, n: f[\"model_weights\"][l][l][n + \":0\"][()]\n"
      "for l in (\"h\", \"out\"):\n"
      "  for n in (\"kernel\", \"bias\"):\n"
      "    x, y = w(a, l, n), w(b, l, n)\n"
      "    assert np.abs(x - y).max() <= 1e-5 * np.abs(x).max(), (l, n)\n"
      "x = np.load(root + \"/val.npz\")[\"x\"].astype(np.float64)\n"
      "h = np.tanh(x @ w(a, \"h\", \"kernel\") + w(a, \"h\", \"bias\"))\n"
      "f = np.concatenate([h[:, 0], h[:, -1, ::-2]], -1)\n"
      "y = 1 / (1 + np.exp(-(f @ w(a, \"out\", \"kernel\") + w(a, \"out\", \"bias\"))))\n"
      "p = np.load(root + \"/p.npy\")\n"
      "assert p.shape == y.shape, (p.shape, y.shape)\n"
      "assert np.abs(p - y).max() <= 1e-5, np.abs(p - y).max()\n"
      "print(\"ok\")\n",
      root.string());
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_NE(checked.out.find("ok"), std::string::npos) << checked.out << checked.err;
}

TEST(IndexingFunctionsCli, TfKerasTwoSlicesTrainCheckpointAndPredict) {
  train_resume_and_predict("tf-indexing-cli", json::parse(kTfKerasModel),
                           "tf.__operators__.getitem as TandemIndexing, tf.compat.v1.squeeze as "
                           "TandemIndexing, tf.concat as Concatenate, tf.expand_dims as "
                           "TandemIndexing; the model's config is written back with those layers "
                           "(the TandemIndexing ones, Tandem's own, as the functions' entries "
                           "were given)",
                           {"tf.__operators__.getitem", "tf.__operators__.getitem_1",
                            "tf.compat.v1.squeeze", "tf.expand_dims"});
}

TEST(IndexingFunctionsCli, KerasThreeGetItemTrainsCheckpointsAndPredicts) {
  train_resume_and_predict("keras3-indexing-cli", keras3_model(),
                           "keras.src.ops.numpy.GetItem as TandemIndexing, "
                           "keras.src.ops.numpy.Squeeze as TandemIndexing",
                           {"get_item", "get_item_1", "squeeze", "expand_dims"});
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
