// Inputs whose length a Keras config leaves null (`Input(shape=(None,))`, as keras.io's text
// models write them), through the CLI: the model config as Keras 3's to_json() writes it trains
// unchanged, built for its training data's length; the checkpoint keeps Keras' nulls (h5py
// reads them) and says which length it was trained on; predict builds the same weights for data
// of another length, and NumPy computes the same predictions from the checkpoint's weights; the
// ONNX export is built for the trained length; import asks for the data it needs; data that
// does not fit, and a checkpoint's garbled lengths, are named.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// `data OUT`: tokens-<length>.npz for lengths 12 (training, validation) and 30: sequences of
// tokens 1-19, labelled 1 when token 7 occurs (half of them).
// `check RUN_DIR DATA PRED`: the checkpoint's model_config keeps the InputLayer's nulls and its
// training state the length trained on; NumPy's forward pass (Embedding, GlobalMaxPooling1D,
// Dense sigmoid) with the checkpoint's weights gives the predictions; prints their accuracy.
// `onnx FILE`: the exported graph's input length.
// `garble CKPT`: the checkpoint's training state with input_shapes that are no shapes.
// `keras3 RUN_DIR OUT`: the run's model saved as Keras 3 saves it (a .keras archive: the config
// as written, the weights by Keras 3's groups: embedding, dense).
constexpr const char* kScript = R"PY(
import json, sys, numpy as np

def data(out):
    rng = np.random.default_rng(11)
    for length, n, name in ((12, 1200, "12"), (12, 300, "12-val"), (30, 300, "30")):
        x = rng.integers(1, 20, size=(n, length))
        x[x == 7] = 8
        y = rng.integers(0, 2, size=n)
        for i in np.flatnonzero(y):
            x[i, rng.integers(0, length)] = 7
        np.savez(f"{out}/tokens-{name}.npz", x=x.astype(np.float32), y=y.astype(np.float32))

def check(run_dir, data_file, pred_file):
    import h5py
    f = h5py.File(f"{run_dir}/model.h5", "r")
    config = json.loads(f.attrs["model_config"])
    shape = config["config"]["layers"][0]["config"]["batch_shape"]
    assert shape == [None, None], shape
    state = json.loads(bytes(f["tandem/state"][()]).decode())
    assert state["input_shapes"] == [[12]], state["input_shapes"]
    def weights(layer):
        g = f["model_weights"][layer]
        return [np.asarray(g[n.decode()]) for n in g.attrs["weight_names"]]
    (table,), (kernel, bias) = weights("embedding"), weights("dense")
    d = np.load(data_file)
    hidden = table[d["x"].astype(np.int64)].max(axis=1)
    want = 1 / (1 + np.exp(-(hidden @ kernel + bias)))
    got = np.load(pred_file)
    assert got.shape == want.shape, (got.shape, want.shape)
    err = np.abs(got - want).max()
    assert err < 1e-5, err
    print(json.dumps({"accuracy": float(((got[:, 0] > 0.5) == d["y"]).mean())}))

def onnx_length(path):
    import onnx
    dims = onnx.load(path).graph.input[0].type.tensor_type.shape.dim
    print(dims[1].dim_value)

def garble(path):
    import h5py
    with h5py.File(path, "r+") as f:
        state = json.loads(bytes(f["tandem/state"][()]).decode())
        state["input_shapes"] = [["twelve"]]
        del f["tandem/state"]
        f["tandem/state"] = np.frombuffer(json.dumps(state).encode(), np.uint8)

def keras3(run_dir, out):
    import h5py, io, zipfile
    with h5py.File(f"{run_dir}/model.h5", "r") as f:
        config = json.loads(f.attrs["model_config"])
        mw = f["model_weights"]
        values = {layer: [np.asarray(mw[layer][n.decode()]) for n in mw[layer].attrs["weight_names"]]
                  for layer in ("embedding", "dense")}
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as w:
        for group in ("vars", "layers/input_layer/vars", "layers/global_max_pooling1d/vars"):
            w.require_group(group)
        for layer, arrays in values.items():
            for i, a in enumerate(arrays):
                w[f"layers/{layer}/vars/{i}"] = a
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.6.0"}))
        z.writestr("config.json", json.dumps(config))
        z.writestr("model.weights.h5", buffer.getvalue())

{"data": lambda: data(sys.argv[2]), "check": lambda: check(*sys.argv[2:5]),
 "onnx": lambda: onnx_length(sys.argv[2]), "garble": lambda: garble(sys.argv[2]),
 "keras3": lambda: keras3(*sys.argv[2:4])}[sys.argv[1]]()
)PY";

// Keras 3's to_json() of
//   tokens = keras.Input(shape=(None,), dtype="int64", name="tokens")
//   x = layers.Embedding(20, 8)(tokens); x = layers.GlobalMaxPooling1D()(x)
//   model = keras.Model(tokens, layers.Dense(1, activation="sigmoid")(x))
json text_classifier() {
  const auto tensor = [](const std::string& layer, const json& shape) {
    return json{
        {"class_name", "__keras_tensor__"},
        {"config", {{"shape", shape}, {"dtype", "float32"}, {"keras_history", {layer, 0, 0}}}}};
  };
  const auto layer = [](const std::string& cls, const std::string& name, json config,
                        const json& input) {
    config["name"] = name;
    config["trainable"] = true;
    return json{{"module", "keras.layers"},
                {"class_name", cls},
                {"config", config},
                {"registered_name", nullptr},
                {"name", name},
                {"inbound_nodes",
                 json::array({json{{"args", json::array({input})}, {"kwargs", json::object()}}})}};
  };
  json layers = json::array();
  layers.push_back({{"module", "keras.layers"},
                    {"class_name", "InputLayer"},
                    {"config",
                     {{"batch_shape", {nullptr, nullptr}},
                      {"dtype", "int64"},
                      {"sparse", false},
                      {"name", "tokens"}}},
                    {"registered_name", nullptr},
                    {"name", "tokens"},
                    {"inbound_nodes", json::array()}});
  layers.push_back(layer("Embedding", "embedding",
                         {{"input_dim", 20}, {"output_dim", 8}, {"mask_zero", false}},
                         tensor("tokens", {nullptr, nullptr})));
  layers.push_back(layer("GlobalMaxPooling1D", "pool",
                         {{"data_format", "channels_last"}, {"keepdims", false}},
                         tensor("embedding", {nullptr, nullptr, 8})));
  layers.push_back(layer("Dense", "dense", {{"units", 1}, {"activation", "sigmoid"}},
                         tensor("pool", {nullptr, 8})));
  return {{"module", "keras"},
          {"class_name", "Functional"},
          {"config",
           {{"name", "text"},
            {"trainable", true},
            {"layers", layers},
            {"input_layers", {{"tokens", 0, 0}}},
            {"output_layers", {{"dense", 0, 0}}}}},
          {"registered_name", "Functional"},
          {"build_config", {{"input_shape", {nullptr, nullptr}}}}};
}

json npz(const fs::path& path) {
  return {{"type", "npz"}, {"path", path.string()}};
}

class AnyLengthCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("any-length");
    auto r = test::run_python(dir_ / "script.py", kScript, "data " + dir_.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto t = test::train_in(dir_, "text", run_config());
    ASSERT_EQ(t.exit_code, 0) << t.err;
  }
  static json run_config() {
    return {{"name", "text"},
            {"seed", 3},
            {"epochs", 6},
            {"batch_size", 32},
            {"model", text_classifier()},
            {"loss", "binary_crossentropy"},
            {"metrics", {"accuracy"}},
            {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.02}}}}},
            {"data",
             {{"train", npz(dir_ / "tokens-12.npz")},
              {"validation", npz(dir_ / "tokens-12-val.npz")}}}};
  }
  static test::CommandResult python(const std::string& args) {
    return test::run_python(dir_ / "script.py", kScript, args);
  }
  static inline fs::path dir_;
};

TEST_F(AnyLengthCli, AKerasTextModelOfAnyLengthTrainsAndPredictsOtherLengths) {
  const json history = test::run_history(dir_ / "text");
  ASSERT_EQ(history.size(), 6u);
  EXPECT_GE(history.back()["val_accuracy"].get<double>(), 0.95);  // chance is 0.5

  // The same weights on sequences of 30: Keras' model takes any length, and so does predict.
  json predict = run_config();
  predict["data"]["validation"] = npz(dir_ / "tokens-30.npz");
  test::write_text(dir_ / "predict-30.json", predict.dump());
  auto p = run_command(test::tandem_cli() + " predict " + (dir_ / "predict-30.json").string() +
                       " --weights " + (dir_ / "text" / "model.h5").string() + " -o " +
                       (dir_ / "pred-30.npy").string());
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto c = python("check " + (dir_ / "text").string() + " " + (dir_ / "tokens-30.npz").string() +
                  " " + (dir_ / "pred-30.npy").string());
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_GE(json::parse(c.out)["accuracy"].get<double>(), 0.95);
}

TEST_F(AnyLengthCli, TheOnnxExportIsBuiltForTheLengthTrainedOn) {
  const fs::path onnx = dir_ / "text.onnx";
  auto e = run_command(test::tandem_cli() + " export " + (dir_ / "text" / "model.h5").string() +
                       " -o " + onnx.string());
  ASSERT_EQ(e.exit_code, 0) << e.err;
  auto l = python("onnx " + onnx.string());
  ASSERT_EQ(l.exit_code, 0) << l.err;
  EXPECT_EQ(l.out, "12\n");

  // A checkpoint whose recorded lengths are garbage is named, not half read.
  const fs::path garbled = dir_ / "garbled.h5";
  fs::copy_file(dir_ / "text" / "model.h5", garbled, fs::copy_options::overwrite_existing);
  auto g = python("garble " + garbled.string());
  ASSERT_EQ(g.exit_code, 0) << g.err;
  auto bad = run_command(test::tandem_cli() + " export " + garbled.string() + " -o " +
                         (dir_ / "garbled.onnx").string());
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("garbled.h5: its training state's input_shapes is not a list of shapes"),
            std::string::npos)
      << bad.err;
  EXPECT_FALSE(fs::exists(dir_ / "garbled.onnx"));
}

TEST_F(AnyLengthCli, ImportAsksForTheDataThatGivesTheLengths) {
  const std::string file = (dir_ / "text" / "model.h5").string();
  auto none = run_command(test::tandem_cli() + " import " + file + " -o " +
                          (dir_ / "imported-none.json").string());
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("the model's inputs leave lengths to the data (None in Keras), which "
                          "Tandem takes from the training data: give it, --set data.train=..."),
            std::string::npos)
      << none.err;
  EXPECT_FALSE(fs::exists(dir_ / "imported-none.json"));

  auto given = run_command(test::tandem_cli() + " import " + file + " -o " +
                           (dir_ / "imported.json").string() +
                           " --set 'data.train=" + npz(dir_ / "tokens-30.npz").dump() + "'");
  ASSERT_EQ(given.exit_code, 0) << given.err;
  const json imported = json::parse(test::read_text(dir_ / "imported.json"));
  EXPECT_EQ(imported["model"]["config"]["layers"][0]["config"]["batch_shape"],
            json({nullptr, nullptr}));
}

// A Keras 3 archive of the model names each group's layer and class, though the model's input
// length is left to data the file does not hold.
TEST_F(AnyLengthCli, InspectNamesTheLayersOfAKeras3ArchiveOfAnyLength) {
  const fs::path archive = dir_ / "text.keras";
  auto k = python("keras3 " + (dir_ / "text").string() + " " + archive.string());
  ASSERT_EQ(k.exit_code, 0) << k.err;
  auto i = run_command(test::tandem_cli() + " inspect " + archive.string() + " --json");
  ASSERT_EQ(i.exit_code, 0) << i.err;
  std::map<std::string, std::pair<std::string, std::string>> held;  // group: (layer, class)
  const json inspected = json::parse(i.out);
  for (const json& layer : inspected.at("layers"))
    held[layer.at("name").get<std::string>()] = {
        layer.at("layer").is_string() ? layer.at("layer").get<std::string>() : "",
        layer.at("class_name").get<std::string>()};
  EXPECT_EQ(held["embedding"], std::make_pair(std::string("embedding"), std::string("Embedding")))
      << i.out;
  EXPECT_EQ(held["dense"], std::make_pair(std::string("dense"), std::string("Dense"))) << i.out;
}

TEST_F(AnyLengthCli, DataThatDoesNotFitIsNamed) {
  // Validation sequences of another length than the training data's, which the model is built for.
  json run = run_config();
  run["epochs"] = 1;
  run["data"]["validation"] = npz(dir_ / "tokens-30.npz");
  auto v = test::train_in(dir_, "other-length", run);
  EXPECT_NE(v.exit_code, 0);
  EXPECT_NE(v.err.find("the validation data has samples of shape (None, 30) but model 'text' "
                       "expects (None, 12)"),
            std::string::npos)
      << v.err;
  EXPECT_FALSE(fs::exists(dir_ / "other-length" / "model.h5"));

  // Samples of another rank than the input's.
  run = run_config();
  run["data"] = {{"train",
                  {{"type", "synthetic"},
                   {"samples", 64},
                   {"x_shape", {12, 2}},
                   {"task", "binary"},
                   {"y_shape", {1}}}}};
  auto s = test::train_in(dir_, "other-rank", run);
  EXPECT_NE(s.exit_code, 0);
  EXPECT_NE(s.err.find("the data's samples have shape (None, 12, 2) but input 'tokens' of model "
                       "'text' takes (None, None) (model.config.layers[0].config), whose null "
                       "lengths Tandem takes from the data"),
            std::string::npos)
      << s.err;
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
