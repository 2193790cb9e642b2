// Functional models that index Keras tensors — h[:, 0] (a BERT classifier's first token),
// tf.squeeze(h[:, -1:, ::-2], 1), tf.expand_dims(c, -1) — as tf.keras 2's to_json() writes them
// (SlicingOpLambda and TFOpLambda entries) and as Keras 3's does (GetItem, Squeeze, ExpandDims
// operations), pasted unchanged into a run config, through the `tandem` binary: `tandem predict`
// gives what NumPy computes from the checkpoint's weights, the checkpoint's model_config holds the
// functions' entries exactly as given (h5py), and contract 1 holds (cpu:3 trains as cpu:1, a
// resumed run ends bit for bit where one run ends).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_config_cli.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;

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

// Data: x uniform in [-1, 1] (n, 6, 4), y = (the first step's sum > the last step's).
const char* kData =
    "import numpy as np, sys\n"
    "r = np.random.default_rng(4)\n"
    "x = r.uniform(-1, 1, (240, 6, 4)).astype(np.float32)\n"
    "y = (x[:, 0].sum(1) > x[:, 5].sum(1))[:, None].astype(np.float32)\n"
    "np.savez(sys.argv[1] + \"/data.npz\", x=x, y=y)\n";

// What NumPy computes from a checkpoint's weights, and that the checkpoint's model_config holds
// the indexing entries exactly as given (given.json).
const char* kCheck =
    "import h5py, json, sys, numpy as np\n"
    "d, weights, out = sys.argv[1:]\n"
    "f = h5py.File(weights, \"r\")\n"
    "layers = {l[\"name\"]: l for l in "
    "json.loads(f.attrs[\"model_config\"])[\"config\"][\"layers\"]}\n"
    "for name, entry in json.load(open(d + \"/given.json\")).items():\n"
    "  assert layers[name] == entry, (name, layers[name], entry)\n"
    "w = lambda l, n: f[\"model_weights\"][l][l][n + \":0\"][()].astype(np.float64)\n"
    "x = np.load(d + \"/data.npz\")[\"x\"].astype(np.float64)\n"
    "h = np.tanh(x @ w(\"h\", \"kernel\") + w(\"h\", \"bias\"))\n"
    "c = np.concatenate([h[:, 0], h[:, -1, ::-2]], -1)\n"
    "np.save(out, 1 / (1 + np.exp(-(c @ w(\"out\", \"kernel\") + w(\"out\", \"bias\")))))\n";

class IndexingFunctionsCli : public test::RunConfigCli {
 protected:
  /// Writes the run of `model`, whose entries named `indexing` are kept for the check.
  void write_run(const json& model, const std::vector<std::string>& indexing) {
    dir_ = test::scratch_dir("indexing-functions");
    auto made = test::run_python(dir_ / "data.py", kData, dir_.string());
    ASSERT_EQ(made.exit_code, 0) << made.err;
    write_classifier_run(model, "indexing");
    json given = json::object();
    for (const json& entry : model["config"]["layers"])
      if (std::find(indexing.begin(), indexing.end(), entry["name"]) != indexing.end())
        given[entry["name"].get<std::string>()] = entry;
    ASSERT_EQ(given.size(), indexing.size());
    test::write_text(dir_ / "given.json", given.dump());
  }
  /// NumPy's prediction from `weights` into `out`, after checking its model_config.
  void expect_numpy_agrees(const fs::path& weights, const fs::path& predicted) {
    auto checked = test::run_python(
        dir_ / "check.py", kCheck,
        dir_.string() + " " + weights.string() + " " + (dir_ / "numpy.npy").string());
    ASSERT_EQ(checked.exit_code, 0) << checked.out << checked.err;
    EXPECT_TRUE(close(predicted, dir_ / "numpy.npy", 1e-5));
  }
  /// Trains from one epoch's weights, predicts as NumPy does, and holds contract 1.
  void train_and_check(const std::string& warning) {
    auto init = train("init", "--set epochs=1");
    ASSERT_EQ(init.exit_code, 0) << init.err;
    EXPECT_NE(init.err.find(warning), std::string::npos) << init.err;
    const fs::path start = dir_ / "init" / "model.h5";
    auto one = train("one", "--weights " + start.string());
    ASSERT_EQ(one.exit_code, 0) << one.err;
    ASSERT_EQ(predict(dir_ / "one" / "model.h5", dir_ / "trained.npy").exit_code, 0);
    expect_numpy_agrees(dir_ / "one" / "model.h5", dir_ / "trained.npy");
    ASSERT_EQ(predict(start, dir_ / "start.npy").exit_code, 0);
    EXPECT_FALSE(close(dir_ / "trained.npy", dir_ / "start.npy", 1e-3));  // it trained
    expect_layout_free_and_resumable(start, dir_ / "trained.npy");
    expect_numpy_agrees(dir_ / "resumed" / "model.h5", dir_ / "resumed.npy");
  }
};

TEST_F(IndexingFunctionsCli, TfKerasTwoSlicesTrainCheckpointAndPredict) {
  write_run(json::parse(kTfKerasModel), {"tf.__operators__.getitem", "tf.__operators__.getitem_1",
                                         "tf.compat.v1.squeeze", "tf.expand_dims"});
  train_and_check(
      "tf.__operators__.getitem as TandemIndexing, tf.compat.v1.squeeze as TandemIndexing, "
      "tf.concat as Concatenate, tf.expand_dims as TandemIndexing; the model's config is "
      "written back with those layers (Tandem's own, which no Keras layer computes, as the "
      "functions' entries were given)");
}

TEST_F(IndexingFunctionsCli, KerasThreeGetItemTrainsCheckpointsAndPredicts) {
  write_run(keras3_model(), {"get_item", "get_item_1", "squeeze", "expand_dims"});
  train_and_check(
      "keras.src.ops.numpy.GetItem as TandemIndexing, keras.src.ops.numpy.Squeeze as "
      "TandemIndexing");
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
