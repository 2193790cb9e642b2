// Keras 3's files through the CLI, as a Keras 3 user brings them: a functional model (written as
// Keras 3's to_json() writes it) whose layers are named so that a pairing by name would swap two
// Dense layers' weights — trained by Tandem, its checkpoint rewritten by h5py into Keras 3's
// layout with each weight's place worked out by hand from Keras' saving_lib (class-named,
// numbered groups; MultiHeadAttention's sublayer attributes; empty groups; optimizer variables),
// and packed with its config.json (a compile_config) into a .keras archive. Evaluating with either
// equals evaluating with the checkpoint; the swapped file does not; `tandem import` makes a run
// config of the archive that trains from it, and its ONNX export holds the checkpoint's weights.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

constexpr const char* kMakeConfig = R"PY(
import json, sys
def t(name):
    return {"class_name": "__keras_tensor__", "config": {"shape": [None, 4, 8], "dtype": "float32", "keras_history": [name, 0, 0]}}
def layer(cls, name, config, args, kwargs=None):
    c = dict(config, name=name, trainable=True, dtype={"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": None})
    return {"module": "keras.layers", "class_name": cls, "config": c, "registered_name": None,
            "build_config": {"input_shape": [None, 4, 8]}, "name": name,
            "inbound_nodes": [{"args": args, "kwargs": kwargs or {}}]}
dense = lambda units, act="linear": {"units": units, "activation": act, "use_bias": True,
    "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": None}, "registered_name": None},
    "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": None},
    "kernel_regularizer": None, "bias_regularizer": None, "kernel_constraint": None, "bias_constraint": None}
layers = [
  {"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [None, 4, 8], "dtype": "float32", "sparse": False, "name": "x"}, "registered_name": None, "name": "x", "inbound_nodes": []},
  layer("Dense", "dense_2", dense(8, "relu"), [t("x")]),
  layer("Dense", "dense", dense(8, "tanh"), [t("x")]),
  layer("Add", "add", {}, [[t("dense_2"), t("dense")]]),
  layer("MultiHeadAttention", "mha", {"num_heads": 2, "key_dim": 4, "value_dim": 4, "dropout": 0.0, "use_bias": True, "output_shape": None, "attention_axes": None,
        "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": None}, "registered_name": None},
        "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": None},
        "kernel_regularizer": None, "bias_regularizer": None, "activity_regularizer": None, "kernel_constraint": None, "bias_constraint": None, "seed": None},
        [t("add"), t("add")]),
  layer("LayerNormalization", "ln", {"axis": [-1], "epsilon": 0.001, "center": True, "scale": True, "rms_scaling": False,
        "beta_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": None},
        "gamma_initializer": {"module": "keras.initializers", "class_name": "Ones", "config": {}, "registered_name": None},
        "beta_regularizer": None, "gamma_regularizer": None, "beta_constraint": None, "gamma_constraint": None}, [t("mha")]),
  layer("GlobalAveragePooling1D", "pool", {"data_format": "channels_last", "keepdims": False}, [t("ln")]),
  layer("BatchNormalization", "bn", {"axis": -1, "momentum": 0.99, "epsilon": 0.001, "center": True, "scale": True,
        "beta_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": None},
        "gamma_initializer": {"module": "keras.initializers", "class_name": "Ones", "config": {}, "registered_name": None},
        "moving_mean_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": None},
        "moving_variance_initializer": {"module": "keras.initializers", "class_name": "Ones", "config": {}, "registered_name": None},
        "beta_regularizer": None, "gamma_regularizer": None, "beta_constraint": None, "gamma_constraint": None, "synchronized": False}, [t("pool")]),
  layer("Dense", "out", dense(3, "softmax"), [t("bn")]),
]
model = {"module": "keras", "class_name": "Functional", "config": {"name": "functional", "trainable": True, "layers": layers,
         "input_layers": [["x", 0, 0]], "output_layers": [["out", 0, 0]]}, "registered_name": "Functional", "build_config": {"input_shape": None}}
data = {"type": "synthetic", "samples": 256, "x_shape": [4, 8], "task": "classes", "classes": 3, "seed": 3}
run = {"name": "k3", "seed": 1, "epochs": 1, "batch_size": 32, "optimizer": "adam", "loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"],
       "model": model, "data": {"train": data, "validation": data}}
json.dump(run, open(sys.argv[1], "w"), indent=1)
)PY";

constexpr const char* kToKeras3 = R"PY(
import h5py, json, sys, zipfile, io
import numpy as np
src, weights_path, archive_path, config_path = sys.argv[1:5]
# Where Keras 3 keeps each weight of this model, worked out by hand from its saving_lib rules.
PLACES = {
    "dense_2/kernel": "layers/dense/vars/0", "dense_2/bias": "layers/dense/vars/1",
    "dense/kernel": "layers/dense_1/vars/0", "dense/bias": "layers/dense_1/vars/1",
    "mha/query/kernel": "layers/multi_head_attention/query_dense/vars/0",
    "mha/query/bias": "layers/multi_head_attention/query_dense/vars/1",
    "mha/key/kernel": "layers/multi_head_attention/key_dense/vars/0",
    "mha/key/bias": "layers/multi_head_attention/key_dense/vars/1",
    "mha/value/kernel": "layers/multi_head_attention/value_dense/vars/0",
    "mha/value/bias": "layers/multi_head_attention/value_dense/vars/1",
    "mha/attention_output/kernel": "layers/multi_head_attention/output_dense/vars/0",
    "mha/attention_output/bias": "layers/multi_head_attention/output_dense/vars/1",
    "ln/gamma": "layers/layer_normalization/vars/0", "ln/beta": "layers/layer_normalization/vars/1",
    "bn/gamma": "layers/batch_normalization/vars/0", "bn/beta": "layers/batch_normalization/vars/1",
    "bn/moving_mean": "layers/batch_normalization/vars/2",
    "bn/moving_variance": "layers/batch_normalization/vars/3",
    "out/kernel": "layers/dense_2/vars/0", "out/bias": "layers/dense_2/vars/1",
}
EMPTY = ["vars", "layers/input_layer/vars", "layers/add/vars", "layers/global_average_pooling1d/vars",
         "layers/multi_head_attention/vars", "layers/multi_head_attention/_softmax/vars",
         "layers/multi_head_attention/_dropout_layer/vars"]
def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)
def write(f):
    places = dict(PLACES)
    for g in EMPTY:
        f.require_group(g)
    with h5py.File(src, "r") as k2:
        mw = k2["model_weights"]
        for layer in (text(n) for n in mw.attrs["layer_names"]):
            for w in (text(n) for n in mw[layer].attrs["weight_names"]):
                name = w.split(":")[0]
                f.create_dataset(places.pop(name), data=mw[layer][w][()])
    assert not places, places
    opt = f.create_group("optimizer/vars")
    opt.create_dataset("0", data=np.array(8, "int64"))
    opt.create_dataset("1", data=np.array(0.001, "float32"))
with h5py.File(weights_path, "w") as f:
    write(f)
# The same with the first two Dense layers' groups swapped: what a pairing by name would load.
PLACES["dense_2/kernel"], PLACES["dense/kernel"] = PLACES["dense/kernel"], PLACES["dense_2/kernel"]
PLACES["dense_2/bias"], PLACES["dense/bias"] = PLACES["dense/bias"], PLACES["dense_2/bias"]
with h5py.File(weights_path.replace(".weights.h5", "-swapped.weights.h5"), "w") as f:
    write(f)
PLACES["dense_2/kernel"], PLACES["dense/kernel"] = PLACES["dense/kernel"], PLACES["dense_2/kernel"]
PLACES["dense_2/bias"], PLACES["dense/bias"] = PLACES["dense/bias"], PLACES["dense_2/bias"]
buffer = io.BytesIO()
with h5py.File(buffer, "w") as f:
    write(f)
model = json.load(open(config_path))["model"]
# model.save() serializes under Keras' object-sharing scope: the one global dtype policy every
# layer holds is marked as shared.
for layer in model["config"]["layers"]:
    if isinstance(layer["config"].get("dtype"), dict):
        layer["config"]["dtype"]["shared_object_id"] = 139872412345680
model["compile_config"] = {
    "optimizer": {"module": "keras.optimizers", "class_name": "Adam", "config": {
        "name": "adam", "learning_rate": 0.0005, "weight_decay": None, "clipnorm": None,
        "global_clipnorm": None, "clipvalue": None, "use_ema": False, "ema_momentum": 0.99,
        "ema_overwrite_frequency": None, "loss_scale_factor": None,
        "gradient_accumulation_steps": None, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07,
        "amsgrad": False}, "registered_name": None},
    "loss": "sparse_categorical_crossentropy", "loss_weights": None, "metrics": ["accuracy"],
    "weighted_metrics": None, "run_eagerly": False, "steps_per_execution": 1, "jit_compile": False}
with zipfile.ZipFile(archive_path, "w") as z:
    z.writestr("metadata.json", json.dumps({"keras_version": "3.6.0", "date_saved": "2026-11-30@18:00:00"}))
    z.writestr("config.json", json.dumps(model))
    z.writestr("model.weights.h5", buffer.getvalue())
)PY";

TEST(Keras3FilesCli, ATrainedModelInKeras3sLayoutEvaluatesAsItsCheckpointAndImports) {
  const fs::path dir = test::scratch_dir("keras3-cli");
  auto made = test::run_python(dir / "make_config.py", kMakeConfig, (dir / "cfg.json").string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string cfg = (dir / "cfg.json").string();
  auto trained = run_command(test::tandem_cli() + " train " + cfg + " --run-dir " +
                             (dir / "run").string() + " -q");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  auto converted = test::run_python(dir / "to_keras3.py", kToKeras3,
                                    (dir / "run" / "model.h5").string() + " " +
                                        (dir / "k3.weights.h5").string() + " " +
                                        (dir / "k3.keras").string() + " " + cfg);
  ASSERT_EQ(converted.exit_code, 0) << converted.err;

  const auto evaluate = [&](const std::string& config, const fs::path& weights) {
    auto r = run_command(test::tandem_cli() + " evaluate " + config + " --weights " +
                         weights.string() + " -q");
    EXPECT_EQ(r.exit_code, 0) << weights << ": " << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json();
  };
  const json own = evaluate(cfg, dir / "run" / "model.h5");
  ASSERT_TRUE(own.contains("loss"));
  EXPECT_EQ(evaluate(cfg, dir / "k3.weights.h5"), own);
  EXPECT_EQ(evaluate(cfg, dir / "k3.keras"), own);
  EXPECT_NE(evaluate(cfg, dir / "k3-swapped.weights.h5")["loss"], own["loss"]);

  const std::string data =
      R"('{"type": "synthetic", "samples": 256, "x_shape": [4, 8], "task": "classes", )"
      R"("classes": 3, "seed": 3}')";
  auto imported = run_command(test::tandem_cli() + " import " + (dir / "k3.keras").string() +
                              " -o " + (dir / "imported.json").string() +
                              " --set data.train=" + data + " --set data.validation=" + data);
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.err.find("Functional model 'functional', 507 parameters"), std::string::npos)
      << imported.err;
  std::ifstream in(dir / "imported.json");
  const json config = json::parse(in);
  EXPECT_EQ(config["optimizer"]["class_name"], "Adam");
  EXPECT_EQ(config["optimizer"]["config"]["learning_rate"], 0.0005);
  EXPECT_EQ(config["loss"], "sparse_categorical_crossentropy");
  EXPECT_EQ(config["metrics"], json::array({"accuracy"}));
  EXPECT_FALSE(config["model"].contains("compile_config"));
  EXPECT_EQ(evaluate((dir / "imported.json").string(), dir / "k3.keras"), own);
  auto again = run_command(test::tandem_cli() + " train " + (dir / "imported.json").string() +
                           " --weights " + (dir / "k3.keras").string() + " --run-dir " +
                           (dir / "again").string() + " -q");
  EXPECT_EQ(again.exit_code, 0) << again.err;

  // Exported to ONNX, the archive's graph holds the checkpoint's weights (read by onnx).
  for (const std::string& from : {std::string("run/model.h5"), std::string("k3.keras")}) {
    auto exported = run_command(test::tandem_cli() + " export " + (dir / from).string() + " -o " +
                                (dir / (fs::path(from).stem().string() + ".onnx")).string());
    ASSERT_EQ(exported.exit_code, 0) << from << ": " << exported.err;
  }
  auto same =
      run_command(std::string(test::system_python()) +
                  " -c \"import onnx, sys, numpy as np; from onnx import numpy_helper as h; "
                  "a, b = (onnx.load(p).graph.initializer for p in sys.argv[1:3]); "
                  "sys.exit(0 if len(a) == len(b) == 27 and all(x.name == y.name and "
                  "np.array_equal(h.to_array(x), h.to_array(y)) for x, y in zip(a, b)) else 1)\" " +
                  (dir / "model.onnx").string() + " " + (dir / "k3.onnx").string());
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;

  auto inspected = run_command(test::tandem_cli() + " inspect " + (dir / "k3.keras").string());
  ASSERT_EQ(inspected.exit_code, 0) << inspected.err;
  EXPECT_NE(inspected.out.find("layout: Keras 3"), std::string::npos) << inspected.out;
  // Each group with the layer Keras 3 keeps there: the first Dense, named dense_2, in "dense".
  std::istringstream rows(inspected.out);
  std::map<std::string, std::string> layer_in;
  for (std::string line; std::getline(rows, line);) {
    std::istringstream row(line);
    std::string group, layer;
    if (row >> group >> layer) layer_in[group] = layer;
  }
  EXPECT_EQ(layer_in["dense"], "dense_2") << inspected.out;
  EXPECT_EQ(layer_in["dense_1"], "dense") << inspected.out;
  EXPECT_EQ(layer_in["dense_2"], "out") << inspected.out;
  EXPECT_EQ(layer_in["multi_head_attention"], "mha") << inspected.out;
  EXPECT_EQ(layer_in["input_layer"], "x") << inspected.out;

  // A model file where a run config goes is named as one, with the way to make a config of it.
  for (const char* file : {"k3.keras", "run/model.h5"}) {
    auto summary = run_command(test::tandem_cli() + " summary " + (dir / file).string());
    EXPECT_EQ(summary.exit_code, 2) << summary.err;
    EXPECT_NE(summary.err.find("not a run config (JSON): make one of a model file with `tandem "
                               "import " +
                               (dir / file).string() + " -o run.json`"),
              std::string::npos)
        << summary.err;
  }

  // A weights file holds no model to import.
  auto weights_only =
      run_command(test::tandem_cli() + " import " + (dir / "k3.weights.h5").string() + " -o " +
                  (dir / "w.json").string());
  EXPECT_EQ(weights_only.exit_code, 2) << weights_only.err;
  EXPECT_NE(weights_only.err.find("holds weights but no model_config"), std::string::npos)
      << weights_only.err;
  EXPECT_FALSE(fs::exists(dir / "w.json"));
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
