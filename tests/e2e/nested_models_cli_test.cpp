// Nested models through the CLI: a siamese model (one encoder model called on two inputs, a
// Sequential head) as Keras 2's to_json() writes it. Weights files in Keras 2's layout (the
// nested model one group of "<layer>/<weight>" datasets) and Keras 3's (its layers' groups under
// its own), written by h5py as Keras writes them, predict what NumPy computes from them; training writes that layout (NumPy reads the checkpoint
// back by its weight_names and computes what Tandem predicts), cpu:3 trains to cpu:1's weights,
// --resume continues to the same weights, and OpenCV runs the ONNX export to the same outputs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_config_cli.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// `make OUT`: data.npz (two inputs of 8 packed in x), keras2.h5 and NumPy's outputs for it.
// `forward H5 NPZ OUT`: NumPy's outputs (float64) for the weights of any Keras 2 layout file
// (Keras' own or a Tandem checkpoint), found as Keras' loader finds them: by each group's
// weight_names, whatever prefix the names carry.
constexpr const char* kScript = R"PY(
import sys, h5py, numpy as np

text = lambda v: v.decode() if isinstance(v, bytes) else str(v)

def weights(path):
    f = h5py.File(path, "r")
    root = f["model_weights"] if "model_weights" in f else f
    out = {}
    for layer in root.attrs["layer_names"]:
        g = root[text(layer)]
        for name in map(text, g.attrs["weight_names"]):
            parts = name.split(":")[0].split("/")
            out["/".join(parts[-2:])] = g[name][()].astype(np.float64)
    return out

def forward(w, x):
    relu = lambda v: np.maximum(v, 0)
    enc = lambda v: relu(v @ w["enc_d1/kernel"] + w["enc_d1/bias"]) @ w["enc_d2/kernel"] + w["enc_d2/bias"]
    c = np.concatenate([enc(x[:, :8]), enc(x[:, 8:])], axis=1)
    h = relu(c @ w["head_d1/kernel"] + w["head_d1/bias"])
    return 1 / (1 + np.exp(-(h @ w["head_out/kernel"] + w["head_out/bias"])))

if sys.argv[1] == "make":
    out = sys.argv[2]
    rng = np.random.default_rng(3)
    x = rng.normal(size=(48, 16)).astype(np.float32)
    y = (np.abs(x[:, :8] - x[:, 8:]).sum(axis=1) > 6.5).astype(np.int64)
    np.savez(f"{out}/data.npz", x=x, y=y)
    shapes = {"enc_d1": (8, 16), "enc_d2": (16, 8), "head_d1": (16, 8), "head_out": (8, 1)}
    w = {}
    for name, (i, o) in shapes.items():
        w[name + "/kernel"] = rng.normal(scale=0.5, size=(i, o)).astype(np.float32)
        w[name + "/bias"] = rng.normal(scale=0.1, size=o).astype(np.float32)
    with h5py.File(f"{out}/keras2.h5", "w") as f:
        f.attrs["keras_version"] = b"2.15.0"
        f.attrs["backend"] = b"tensorflow"
        f.attrs["layer_names"] = [b"left", b"right", b"encoder", b"concat", b"head"]
        for layer, inner in (("left", []), ("right", []), ("encoder", ["enc_d1", "enc_d2"]),
                             ("concat", []), ("head", ["head_d1", "head_out"])):
            g = f.create_group(layer)
            names = [f"{l}/{k}:0" for l in inner for k in ("kernel", "bias")]
            g.attrs["weight_names"] = [n.encode() for n in names]
            for n in names:
                g.create_dataset(n, data=w[n.split(":")[0]])
    # Keras 3's layout: groups by class and place, a nested model's layers under its own group.
    with h5py.File(f"{out}/keras3.weights.h5", "w") as f:
        f.create_group("vars")
        layers = f.create_group("layers")
        for empty in ("input_layer", "input_layer_1", "concatenate"):
            layers.create_group(empty).create_group("vars")
        for group, inner in (("functional", (("input_layer", None), ("dense", "enc_d1"),
                                             ("dense_1", "enc_d2"))),
                             ("sequential", (("dense", "head_d1"), ("dense_1", "head_out")))):
            model = layers.create_group(group)
            model.create_group("vars")
            for place, layer in inner:
                v = model.create_group(f"layers/{place}/vars")
                if layer:
                    v.create_dataset("0", data=w[layer + "/kernel"])
                    v.create_dataset("1", data=w[layer + "/bias"])
    np.save(f"{out}/expected.npy", forward(weights(f"{out}/keras2.h5"), x.astype(np.float64)))
else:
    x = np.load(sys.argv[3])["x"].astype(np.float64)
    np.save(sys.argv[4], forward(weights(sys.argv[2]), x))
)PY";

json input(const std::string& name) {
  return {{"class_name", "InputLayer"},
          {"config", {{"batch_input_shape", {nullptr, 8}}, {"dtype", "float32"}, {"name", name}}},
          {"name", name},
          {"inbound_nodes", json::array()}};
}

json dense(const std::string& name, int units, const char* activation) {
  return {{"class_name", "Dense"},
          {"config",
           {{"name", name}, {"trainable", true}, {"units", units}, {"activation", activation}}}};
}

json ref(const char* layer, int node) {
  return json::array({layer, node, 0, json::object()});
}

json calls(std::initializer_list<std::vector<json>> per_call) {
  return test::keras2_calls(per_call);
}

// Keras 2.15's to_json() of the siamese model (the calls of a nested Functional model and of a
// Sequential one with an InputLayer numbered from 1, as Keras 2 numbers them).
json siamese() {
  json enc_d1 = dense("enc_d1", 16, "relu");
  enc_d1["name"] = "enc_d1";
  enc_d1["inbound_nodes"] = calls({{ref("enc_in", 0)}});
  json enc_d2 = dense("enc_d2", 8, "linear");
  enc_d2["name"] = "enc_d2";
  enc_d2["inbound_nodes"] = calls({{ref("enc_d1", 0)}});
  const json encoder = {{"class_name", "Functional"},
                        {"name", "encoder"},
                        {"config",
                         {{"name", "encoder"},
                          {"layers", {input("enc_in"), enc_d1, enc_d2}},
                          {"input_layers", {{"enc_in", 0, 0}}},
                          {"output_layers", {{"enc_d2", 0, 0}}}}},
                        {"inbound_nodes", calls({{ref("left", 0)}, {ref("right", 0)}})}};
  json head_in = input("head_in");
  head_in["config"]["batch_input_shape"] = {nullptr, 16};
  const json head = {{"class_name", "Sequential"},
                     {"name", "head"},
                     {"config",
                      {{"name", "head"},
                       {"layers",
                        {{{"class_name", "InputLayer"}, {"config", head_in["config"]}},
                         dense("head_d1", 8, "relu"),
                         dense("head_out", 1, "sigmoid")}}}},
                     {"inbound_nodes", calls({{ref("concat", 0)}})}};
  const json concat = {{"class_name", "Concatenate"},
                       {"name", "concat"},
                       {"config", {{"name", "concat"}, {"axis", -1}}},
                       {"inbound_nodes", calls({{ref("encoder", 1), ref("encoder", 2)}})}};
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "siamese"},
            {"layers", {input("left"), input("right"), encoder, concat, head}},
            {"input_layers", {{"left", 0, 0}, {"right", 0, 0}}},
            {"output_layers", {{"head", 1, 0}}}}},
          {"keras_version", "2.15.0"},
          {"backend", "tensorflow"}};
}

class NestedModelsCli : public test::RunConfigCli {
 protected:
  void SetUp() override {
    dir_ = test::scratch_dir("nested-models");
    auto made = test::run_python(dir_ / "script.py", kScript, "make " + dir_.string());
    ASSERT_EQ(made.exit_code, 0) << made.err;
    write_classifier_run(siamese(), "siamese");
  }
  test::CommandResult numpy_forward(const fs::path& weights, const fs::path& output) {
    return test::run_python(
        dir_ / "script.py", kScript,
        "forward " + weights.string() + " " + (dir_ / "data.npz").string() + " " + output.string());
  }
};

TEST_F(NestedModelsCli, AKerasTwoFilePredictsAsNumPyComputes) {
  auto summary = run_command(test::tandem_cli() + " summary " + (dir_ / "run.json").string());
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_NE(summary.out.find(" encoder (Functional)"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find(" head (Sequential)"), std::string::npos) << summary.out;
  EXPECT_EQ(summary.out.find("enc_d1 (Dense)"), std::string::npos) << summary.out;
  auto expanded = run_command(test::tandem_cli() + " summary " + (dir_ / "run.json").string() +
                              " --expand-nested");
  ASSERT_EQ(expanded.exit_code, 0) << expanded.err;
  EXPECT_NE(expanded.out.find(" └ enc_d1 (Dense)"), std::string::npos) << expanded.out;
  auto r = predict(dir_ / "keras2.h5", dir_ / "pred.npy");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("paired by order"), std::string::npos) << r.err;  // paired by name
  EXPECT_TRUE(close(dir_ / "pred.npy", dir_ / "expected.npy", 1e-5));
  auto keras3 = predict(dir_ / "keras3.weights.h5", dir_ / "keras3.npy");
  ASSERT_EQ(keras3.exit_code, 0) << keras3.err;
  EXPECT_TRUE(close(dir_ / "keras3.npy", dir_ / "expected.npy", 1e-5));
}

TEST_F(NestedModelsCli, CheckpointsKeepKerasNestingAndTrainAlikeOnEveryLayout) {
  auto one = train("one", "--weights " + (dir_ / "keras2.h5").string());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const fs::path model = dir_ / "one" / "model.h5";
  // h5py: the nested models are one group each, their config nested as it was written.
  auto layout = run_command(
      std::string(test::system_python()) + " -c \"" +
      "import h5py, json\n"
      "text = lambda v: v.decode() if isinstance(v, bytes) else str(v)\n"
      "f = h5py.File('" +
      model.string() +
      "', 'r')\n"
      "w = f['model_weights']\n"
      "assert [text(n) for n in w.attrs['layer_names']] == ['left', 'right', 'encoder', "
      "'concat', 'head'], w.attrs['layer_names']\n"
      "names = [text(n) for n in w['encoder'].attrs['weight_names']]\n"
      "assert [n.split('/', 1)[1] for n in names] == ['enc_d1/kernel:0', 'enc_d1/bias:0', "
      "'enc_d2/kernel:0', 'enc_d2/bias:0'], names\n"
      "assert w['encoder'][names[0]].shape == (8, 16)\n"
      "c = json.loads(f.attrs['model_config'])\n"
      "assert c['config']['layers'][2]['class_name'] == 'Functional'\n"
      "assert c['config']['layers'][4]['config']['layers'][2]['config']['name'] == 'head_out'\n\"");
  EXPECT_EQ(layout.exit_code, 0) << layout.err;
  // NumPy computes from the checkpoint, read as Keras reads it, what Tandem predicts from it.
  ASSERT_EQ(predict(model, dir_ / "trained.npy").exit_code, 0);
  ASSERT_EQ(numpy_forward(model, dir_ / "numpy.npy").exit_code, 0);
  EXPECT_TRUE(close(dir_ / "trained.npy", dir_ / "numpy.npy", 1e-5));
  EXPECT_FALSE(close(dir_ / "trained.npy", dir_ / "expected.npy", 1e-3));  // it trained

  // The device layout does not show in the result (contract 1); --resume continues.
  expect_layout_free_and_resumable(dir_ / "keras2.h5", dir_ / "trained.npy");
}

TEST_F(NestedModelsCli, TheOnnxExportComputesWhatTandemDoes) {
  auto e =
      run_command(test::tandem_cli() + " export " + (dir_ / "keras2.h5").string() + " --config " +
                  (dir_ / "run.json").string() + " -o " + (dir_ / "model.onnx").string());
  ASSERT_EQ(e.exit_code, 0) << e.err;
  auto o = run_command(std::string(test::system_python()) + " -c \"" +
                       "import cv2, numpy as np, onnx\n"
                       "onnx.checker.check_model(onnx.load('" +
                       (dir_ / "model.onnx").string() +
                       "'))\n"
                       "net = cv2.dnn.readNetFromONNX('" +
                       (dir_ / "model.onnx").string() +
                       "')\n"
                       "x = np.load('" +
                       (dir_ / "data.npz").string() +
                       "')['x']\n"
                       "net.setInput(np.ascontiguousarray(x[:, :8]), 'left')\n"
                       "net.setInput(np.ascontiguousarray(x[:, 8:]), 'right')\n"
                       "np.save('" +
                       (dir_ / "onnx.npy").string() + "', net.forward())\n\"");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(close(dir_ / "onnx.npy", dir_ / "expected.npy", 1e-5));
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
