// Recurrent layers through the CLI: a Sequential model of an LSTM (every step's output, with
// dropout and recurrent dropout) and a GRU (go_backwards, the last step's output) as Keras 2.15's
// to_json() writes it. Weights files in Keras 2's layout ("lstm/lstm_cell/kernel:0") and Keras
// 3's (the cell's weights under layers/lstm/cell/vars), written by h5py as Keras writes them,
// predict what NumPy computes from them in float64; a checkpoint keeps Keras 2's names (NumPy
// reads it back by its weight_names and computes what Tandem predicts); cpu:3 trains to cpu:1's
// weights, dropout and all; and an LSTM learns a task that needs its memory (the sign of the
// first step, read after eleven more).
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "run_config_cli.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// `make OUT`: data.npz (x: 96 sequences of 12 steps of 3 features; y: the sign of x[:, 0, 0]),
// keras2.h5 and keras3.weights.h5 (the same random weights) and NumPy's outputs for them.
// `forward H5 NPZ OUT`: NumPy's outputs for the weights of a Keras 2 layout file (Keras' own or a
// Tandem checkpoint), found by each group's weight_names as Keras' loader finds them.
constexpr const char* kScript = R"PY(
import sys, h5py, numpy as np

text = lambda v: v.decode() if isinstance(v, bytes) else str(v)
sigmoid = lambda v: 1 / (1 + np.exp(-v))
SHAPES = {"lstm": ((3, 32), (8, 32), (32,)), "gru": ((8, 18), (6, 18), (2, 18)),
          "dense": ((6, 1), (1,))}

def weights(path):
    f = h5py.File(path, "r")
    root = f["model_weights"] if "model_weights" in f else f
    return {text(l): [root[text(l)][n][()].astype(np.float64)
                      for n in map(text, root[text(l)].attrs["weight_names"])]
            for l in root.attrs["layer_names"] if len(root[text(l)].attrs["weight_names"])}

def lstm(x, k, r, b):  # Keras: gates i, f, c, o; every step's h
    u = r.shape[0]
    h, c, out = np.zeros((x.shape[0], u)), np.zeros((x.shape[0], u)), []
    for t in range(x.shape[1]):
        z = x[:, t] @ k + h @ r + b
        i, f, g, o = sigmoid(z[:, :u]), sigmoid(z[:, u:2*u]), np.tanh(z[:, 2*u:3*u]), sigmoid(z[:, 3*u:])
        c = f * c + i * g
        h = o * np.tanh(c)
        out.append(h)
    return np.stack(out, axis=1)

def gru_backwards(x, k, r, b):  # Keras reset_after: gates z, r, h; the input reversed; last h
    u = r.shape[0]
    h = np.zeros((x.shape[0], u))
    for t in reversed(range(x.shape[1])):
        xw, inner = x[:, t] @ k + b[0], h @ r + b[1]
        z, rr = sigmoid(xw[:, :u] + inner[:, :u]), sigmoid(xw[:, u:2*u] + inner[:, u:2*u])
        hh = np.tanh(xw[:, 2*u:] + rr * inner[:, 2*u:])
        h = z * h + (1 - z) * hh
    return h

def forward(w, x):
    return sigmoid(gru_backwards(lstm(x, *w["lstm"]), *w["gru"]) @ w["dense"][0] + w["dense"][1])

if sys.argv[1] == "make":
    out = sys.argv[2]
    rng = np.random.default_rng(5)
    x = rng.normal(size=(96, 12, 3)).astype(np.float32)
    y = (x[:, 0, 0] > 0).astype(np.int64)
    np.savez(f"{out}/data.npz", x=x, y=y)
    w = {l: [rng.normal(scale=0.4, size=s).astype(np.float32) for s in shapes]
         for l, shapes in SHAPES.items()}
    cells = {"lstm": "lstm_cell", "gru": "gru_cell", "dense": None}
    with h5py.File(f"{out}/keras2.h5", "w") as f:
        f.attrs["keras_version"] = b"2.15.0"
        f.attrs["backend"] = b"tensorflow"
        f.attrs["layer_names"] = [l.encode() for l in SHAPES]
        for l, values in w.items():
            g = f.create_group(l)
            kinds = ["kernel", "recurrent_kernel", "bias"] if cells[l] else ["kernel", "bias"]
            names = [f"{l}/{cells[l] + '/' if cells[l] else ''}{k}:0" for k in kinds]
            g.attrs["weight_names"] = [n.encode() for n in names]
            for n, v in zip(names, values):
                g.create_dataset(n, data=v)
    with h5py.File(f"{out}/keras3.weights.h5", "w") as f:
        f.create_group("vars")
        for l, values in w.items():
            at = f"layers/{l}/cell/vars" if cells[l] else f"layers/{l}/vars"
            if cells[l]:
                f.create_group(f"layers/{l}/vars")
            v = f.create_group(at)
            for i, value in enumerate(values):
                v.create_dataset(str(i), data=value)
    np.save(f"{out}/expected.npy", forward(weights(f"{out}/keras2.h5"), x.astype(np.float64)))
else:
    x = np.load(sys.argv[3])["x"].astype(np.float64)
    np.save(sys.argv[4], forward(weights(sys.argv[2]), x))
)PY";

json initializer(const char* cls) {
  return {{"module", "keras.initializers"},
          {"class_name", cls},
          {"config", {{"seed", nullptr}}},
          {"registered_name", nullptr}};
}

// A recurrent layer's config as Keras 2.15's to_json() writes it.
json recurrent(const char* cls, const char* name, int units, bool sequences, bool backwards,
               double dropout) {
  json config = {{"name", name},
                 {"trainable", true},
                 {"dtype", "float32"},
                 {"return_sequences", sequences},
                 {"return_state", false},
                 {"go_backwards", backwards},
                 {"stateful", false},
                 {"unroll", false},
                 {"time_major", false},
                 {"units", units},
                 {"activation", "tanh"},
                 {"recurrent_activation", "sigmoid"},
                 {"use_bias", true},
                 {"kernel_initializer", initializer("GlorotUniform")},
                 {"recurrent_initializer", initializer("Orthogonal")},
                 {"bias_initializer", initializer("Zeros")},
                 {"kernel_regularizer", nullptr},
                 {"recurrent_regularizer", nullptr},
                 {"bias_regularizer", nullptr},
                 {"activity_regularizer", nullptr},
                 {"kernel_constraint", nullptr},
                 {"recurrent_constraint", nullptr},
                 {"bias_constraint", nullptr},
                 {"dropout", dropout},
                 {"recurrent_dropout", dropout},
                 {"implementation", 2}};
  if (std::string(cls) == "LSTM") config["unit_forget_bias"] = true;
  if (std::string(cls) == "GRU") config["reset_after"] = true;
  config["recurrent_initializer"]["config"]["gain"] = 1.0;
  return {{"module", "keras.layers"},
          {"class_name", cls},
          {"config", config},
          {"registered_name", nullptr}};
}

json sequential() {
  const json input = {{"class_name", "InputLayer"},
                      {"config",
                       {{"batch_input_shape", {nullptr, 12, 3}},
                        {"dtype", "float32"},
                        {"sparse", false},
                        {"ragged", false},
                        {"name", "steps"}}}};
  const json dense = {
      {"class_name", "Dense"},
      {"config",
       {{"name", "dense"}, {"trainable", true}, {"units", 1}, {"activation", "sigmoid"}}}};
  return {{"class_name", "Sequential"},
          {"config",
           {{"name", "recurrent"},
            {"layers",
             {input, recurrent("LSTM", "lstm", 8, true, false, 0.1),
              recurrent("GRU", "gru", 6, false, true, 0.0), dense}}}},
          {"keras_version", "2.15.0"},
          {"backend", "tensorflow"}};
}

class RecurrentCli : public test::RunConfigCli {
 protected:
  void SetUp() override {
    dir_ = test::scratch_dir("recurrent-cli");
    auto made = test::run_python(dir_ / "script.py", kScript, "make " + dir_.string());
    ASSERT_EQ(made.exit_code, 0) << made.err;
    write_classifier_run(sequential(), "recurrent");
  }
};

TEST_F(RecurrentCli, KerasFilesOfBothLayoutsPredictAsNumPyComputes) {
  auto summary = run_command(test::tandem_cli() + " summary " + (dir_ / "run.json").string());
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_NE(summary.out.find("lstm (LSTM)"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("(None, 12, 8)"), std::string::npos) << summary.out;
  // 4 gates x 8 units x (3 inputs + 8 recurrent + 1 bias); 3 x 6 x (8 + 6 + 2).
  EXPECT_NE(summary.out.find("384"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("288"), std::string::npos) << summary.out;
  auto r = predict(dir_ / "keras2.h5", dir_ / "pred.npy");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("paired by order"), std::string::npos) << r.err;
  EXPECT_TRUE(close(dir_ / "pred.npy", dir_ / "expected.npy", 1e-5));
  auto keras3 = predict(dir_ / "keras3.weights.h5", dir_ / "keras3.npy");
  ASSERT_EQ(keras3.exit_code, 0) << keras3.err;
  EXPECT_TRUE(close(dir_ / "keras3.npy", dir_ / "expected.npy", 1e-5));
}

TEST_F(RecurrentCli, CheckpointsKeepKerasNamesAndTrainAlikeOnEveryLayout) {
  auto one = train("one", "--weights " + (dir_ / "keras2.h5").string());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const fs::path model = dir_ / "one" / "model.h5";
  auto names = run_command(std::string(test::system_python()) + " -c \"" +
                           "import h5py\n"
                           "f = h5py.File('" +
                           model.string() +
                           "', 'r')['model_weights']\n"
                           "n = [v.decode() for v in f['lstm'].attrs['weight_names']]\n"
                           "assert n == ['lstm/lstm_cell/kernel:0', "
                           "'lstm/lstm_cell/recurrent_kernel:0', 'lstm/lstm_cell/bias:0'], n\n"
                           "assert f['gru']['gru/gru_cell/bias:0'].shape == (2, 18)\n\"");
  EXPECT_EQ(names.exit_code, 0) << names.err;
  ASSERT_EQ(predict(model, dir_ / "trained.npy").exit_code, 0);
  auto numpy = test::run_python(dir_ / "script.py", kScript,
                                "forward " + model.string() + " " + (dir_ / "data.npz").string() +
                                    " " + (dir_ / "numpy.npy").string());
  ASSERT_EQ(numpy.exit_code, 0) << numpy.err;
  EXPECT_TRUE(close(dir_ / "trained.npy", dir_ / "numpy.npy", 1e-5));
  EXPECT_FALSE(close(dir_ / "trained.npy", dir_ / "expected.npy", 1e-3));  // it trained

  // The device layout does not show in the result, dropout masks included (contract 1); --resume
  // continues.
  expect_layout_free_and_resumable(dir_ / "keras2.h5", dir_ / "trained.npy");
}

// The export: ONNX's LSTM and GRU operators (tests/oracle runs them as the specification
// defines them); a cell activation ONNX's operators do not take is refused, naming the layer,
// and no file is written.
TEST_F(RecurrentCli, ExportsToOnnxOrSaysWhichLayerCannot) {
  auto e =
      run_command(test::tandem_cli() + " export " + (dir_ / "keras2.h5").string() + " --config " +
                  (dir_ / "run.json").string() + " -o " + (dir_ / "model.onnx").string());
  ASSERT_EQ(e.exit_code, 0) << e.err;
  auto ops = run_command(std::string(test::system_python()) + " -c \"" +
                         "import onnx\n"
                         "m = onnx.load('" +
                         (dir_ / "model.onnx").string() +
                         "')\n"
                         "onnx.checker.check_model(m, full_check=True)\n"
                         "print(sorted({n.op_type for n in m.graph.node}))\"");
  ASSERT_EQ(ops.exit_code, 0) << ops.err;
  EXPECT_NE(ops.out.find("'LSTM'"), std::string::npos) << ops.out;
  EXPECT_NE(ops.out.find("'GRU'"), std::string::npos) << ops.out;

  json run = json::parse(test::read_text(dir_ / "run.json"));
  run["model"]["config"]["layers"][1]["config"]["activation"] = "gelu";
  test::write_text(dir_ / "gelu.json", run.dump());
  auto refused =
      run_command(test::tandem_cli() + " export " + (dir_ / "keras2.h5").string() + " --config " +
                  (dir_ / "gelu.json").string() + " -o " + (dir_ / "gelu.onnx").string());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("layer 'lstm' (LSTM) cannot be exported to ONNX: ONNX's recurrent "
                             "operators take tanh, sigmoid, relu, softsign, softplus or Keras 2's "
                             "hard_sigmoid as the cell's activations, not gelu / sigmoid"),
            std::string::npos)
      << refused.err;
  EXPECT_FALSE(fs::exists(dir_ / "gelu.onnx"));
}

// Bidirectional wrappers: Bidirectional(LSTM, concat, every step) and Bidirectional(GRU, sum,
// the last step) as Keras 2.15 writes them, their weights in Keras 2's names
// ("bidirectional/forward_lstm/lstm_cell/kernel:0", the forward layer's first) and Keras 3's
// paths (layers/bidirectional/forward_layer/cell/vars/0), against NumPy.
constexpr const char* kBidirectionalScript = R"PY(
import sys, h5py, numpy as np

sigmoid = lambda v: 1 / (1 + np.exp(-v))

def lstm(x, k, r, b, backwards):
    u = r.shape[0]
    h, c, out = np.zeros((x.shape[0], u)), np.zeros((x.shape[0], u)), []
    for t in (reversed(range(x.shape[1])) if backwards else range(x.shape[1])):
        z = x[:, t] @ k + h @ r + b
        i, f, g, o = sigmoid(z[:, :u]), sigmoid(z[:, u:2*u]), np.tanh(z[:, 2*u:3*u]), sigmoid(z[:, 3*u:])
        c = f * c + i * g
        h = o * np.tanh(c)
        out.append(h)
    return np.stack(out, axis=1)  # in processing order

def gru(x, k, r, b, backwards):
    u = r.shape[0]
    h = np.zeros((x.shape[0], u))
    for t in (reversed(range(x.shape[1])) if backwards else range(x.shape[1])):
        xw, inner = x[:, t] @ k + b[0], h @ r + b[1]
        z, rr = sigmoid(xw[:, :u] + inner[:, :u]), sigmoid(xw[:, u:2*u] + inner[:, u:2*u])
        h = z * h + (1 - z) * np.tanh(xw[:, 2*u:] + rr * inner[:, 2*u:])
    return h

out = sys.argv[1]
rng = np.random.default_rng(9)
x = rng.normal(size=(40, 5, 3))
shapes = {"lstm": [(3, 12), (3, 12), (12,)], "gru": [(6, 6), (2, 6), (2, 6)]}
w = {(l, side): [rng.normal(scale=0.5, size=s) for s in shapes[l]]
     for l in shapes for side in ("forward", "backward")}
ahead = lstm(x, *w["lstm", "forward"], False)
behind = lstm(x, *w["lstm", "backward"], True)[:, ::-1]
y = np.concatenate([ahead, behind], axis=2)
y = gru(y, *w["gru", "forward"], False) + gru(y, *w["gru", "backward"], True)
np.savez(f"{out}/data.npz", x=x.astype(np.float32), y=np.ascontiguousarray(x[:, [0, -1], 0], dtype=np.float32))
np.save(f"{out}/expected.npy", y)
groups = {"lstm": "bidirectional", "gru": "bidirectional_1"}
with h5py.File(f"{out}/keras2.h5", "w") as f:
    f.attrs["keras_version"] = b"2.15.0"
    f.attrs["layer_names"] = [g.encode() for g in groups.values()]
    for l, g in groups.items():
        names = [f"{g}/{side}_{l}/{l}_cell/{k}:0" for side in ("forward", "backward")
                 for k in ("kernel", "recurrent_kernel", "bias")]
        grp = f.create_group(g)
        grp.attrs["weight_names"] = [n.encode() for n in names]
        values = w[l, "forward"] + w[l, "backward"]
        for n, v in zip(names, values):
            grp.create_dataset(n, data=v.astype(np.float32))
with h5py.File(f"{out}/keras3.weights.h5", "w") as f:
    f.create_group("vars")
    for l, g in groups.items():
        f.create_group(f"layers/{g}/vars")
        for side in ("forward", "backward"):
            f.create_group(f"layers/{g}/{side}_layer/vars")
            v = f.create_group(f"layers/{g}/{side}_layer/cell/vars")
            for i, value in enumerate(w[l, side]):
                v.create_dataset(str(i), data=value.astype(np.float32))
)PY";

json bidirectional(const char* cls, const char* inner, int units, bool sequences,
                   const char* merge) {
  json wrapped = recurrent(cls, inner, units, sequences, false, 0.0);
  return {{"class_name", "Bidirectional"},
          {"config",
           {{"name", std::string(cls) == "LSTM" ? "bidirectional" : "bidirectional_1"},
            {"trainable", true},
            {"dtype", "float32"},
            {"layer", wrapped},
            {"merge_mode", merge}}}};
}

TEST(RecurrentBidirectionalCli, KerasFilesOfBothLayoutsPredictAsNumPyAndTrainAlikeOnCpu3) {
  const fs::path dir = test::scratch_dir("recurrent-bidirectional");
  auto made = test::run_python(dir / "script.py", kBidirectionalScript, dir.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const json layers = {{{"class_name", "InputLayer"},
                        {"config", {{"batch_input_shape", {nullptr, 5, 3}}, {"name", "steps"}}}},
                       bidirectional("LSTM", "lstm", 3, true, "concat"),
                       bidirectional("GRU", "gru", 2, false, "sum")};
  const json data = {{"type", "npz"}, {"path", (dir / "data.npz").string()}};
  const json run = {
      {"name", "bi"},
      {"seed", 2},
      {"epochs", 2},
      {"batch_size", 8},
      {"model", {{"class_name", "Sequential"}, {"config", {{"name", "bi"}, {"layers", layers}}}}},
      {"loss", "mse"},
      {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
      {"data", {{"train", data}}}};
  test::write_text(dir / "run.json", run.dump(2));
  const std::string cli = test::tandem_cli();
  auto summary = run_command(cli + " summary " + (dir / "run.json").string());
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  // 2 x 4 gates x 3 units x (3 inputs + 3 recurrent + 1 bias); 2 x 3 x 2 x (6 + 2 + 2).
  EXPECT_NE(summary.out.find("(None, 5, 6)              168"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("(None, 2)                 120"), std::string::npos) << summary.out;
  const auto close = [&](const std::string& a, const std::string& b, double rtol) {
    return test::npy_close(dir / a, dir / b, rtol, dir);
  };

  for (const char* file : {"keras2.h5", "keras3.weights.h5"}) {
    SCOPED_TRACE(file);
    auto r =
        run_command(cli + " predict " + (dir / "run.json").string() + " --weights " +
                    (dir / file).string() + " --split train -o " + (dir / "pred.npy").string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(close("pred.npy", "expected.npy", 1e-5));
  }
  for (const char* plan : {"cpu:1", "cpu:3"}) {
    auto t = run_command(cli + " train " + (dir / "run.json").string() + " --weights " +
                         (dir / "keras2.h5").string() + " --devices " + plan + " --run-dir " +
                         (dir / plan).string() + " -q");
    ASSERT_EQ(t.exit_code, 0) << t.err;
    ASSERT_EQ(run_command(cli + " predict " + (dir / "run.json").string() + " --weights " +
                          (dir / plan / "model.h5").string() + " --split train -o " +
                          (dir / (std::string(plan) + ".npy")).string())
                  .exit_code,
              0);
  }
  EXPECT_TRUE(close("cpu:3.npy", "cpu:1.npy", 1e-5));
  EXPECT_FALSE(close("cpu:1.npy", "expected.npy", 1e-3));  // it trained
}

// A binary classifier's run config: `layers` (a Sequential model's), Adam at 0.01, trained on
// dir/train.npz and validated on dir/val.npz.
json classifier_run(const fs::path& dir, const json& layers, int seed, int epochs) {
  return {
      {"name", "classifier"},
      {"seed", seed},
      {"epochs", epochs},
      {"batch_size", 32},
      {"model", {{"class_name", "Sequential"}, {"config", {{"name", "m"}, {"layers", layers}}}}},
      {"loss", "binary_crossentropy"},
      {"metrics", {"accuracy"}},
      {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
      {"data",
       {{"train", {{"type", "npz"}, {"path", (dir / "train.npz").string()}}},
        {"validation", {{"type", "npz"}, {"path", (dir / "val.npz").string()}}}}}};
}

// The last epoch's val_accuracy of a run folder (its events.jsonl).
double last_val_accuracy(const fs::path& run_dir) {
  double accuracy = 0;
  std::istringstream events(test::read_text(run_dir / "events.jsonl"));
  for (std::string line; std::getline(events, line);) {
    const json e = json::parse(line);
    if (e["event"] == "epoch_ended") accuracy = e["logs"]["val_accuracy"].get<double>();
  }
  return accuracy;
}

// Each recurrent layer learns what a stateless model cannot: the label is the sign of the first
// step's first feature, and the layer reads it eleven steps before its last output. Six epochs
// of 2,000 sequences; measured 0.965 (LSTM), 0.978 (GRU), 0.948 (SimpleRNN) where a guess is 0.5.
TEST(RecurrentLearning, EachRecurrentLayerRemembersTheFirstStep) {
  const fs::path dir = test::scratch_dir("recurrent-learning");
  auto made = run_command(std::string(test::system_python()) + " -c \"" +
                          "import numpy as np\n"
                          "rng = np.random.default_rng(1)\n"
                          "for n, name in ((2000, 'train'), (400, 'val')):\n"
                          "    x = rng.normal(size=(n, 12, 3)).astype(np.float32)\n"
                          "    np.savez('" +
                          dir.string() +
                          "/' + name + '.npz', x=x, y=(x[:, 0, 0] > 0).astype(np.int64))\n\"");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  for (const char* cls : {"LSTM", "GRU", "SimpleRNN"}) {
    SCOPED_TRACE(cls);
    const json layers = {{{"class_name", "InputLayer"},
                          {"config", {{"batch_input_shape", {nullptr, 12, 3}}, {"name", "steps"}}}},
                         {{"class_name", cls}, {"config", {{"name", "memory"}, {"units", 16}}}},
                         {{"class_name", "Dense"},
                          {"config", {{"name", "out"}, {"units", 1}, {"activation", "sigmoid"}}}}};
    const json run = classifier_run(dir, layers, 1, 6);
    test::write_text(dir / "run.json", run.dump(2));
    const fs::path run_dir = dir / cls;
    auto r = run_command(test::tandem_cli() + " train " + (dir / "run.json").string() +
                         " --run-dir " + run_dir.string() + " -q");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_GE(last_val_accuracy(run_dir), 0.9);
  }
}

// The layers of a model over 12 padded tokens (0 pads, 10 words): Embedding(mask_zero), then
// `recurrent` and `head`.
json padded_tokens_through(const json& recurrent, const json& head) {
  return {
      {{"class_name", "InputLayer"},
       {"config", {{"batch_input_shape", {nullptr, 12}}, {"dtype", "int32"}, {"name", "tokens"}}}},
      {{"class_name", "Embedding"},
       {"config",
        {{"name", "embedding"}, {"input_dim", 11}, {"output_dim", 8}, {"mask_zero", true}}}},
      recurrent,
      head};
}

// Padded token sequences through Embedding(mask_zero) and an LSTM, as a Keras text classifier
// is written: 1 to 12 tokens then zeros; the label is whether the last real token is above 5.
// It learns it (validation accuracy >= 0.9 in 5 epochs); the padding is skipped, so the same
// tokens padded at the front instead predict the same (1e-6); cpu:3 trains to cpu:1's weights;
// the ONNX export refuses the masked steps, naming the layer.
TEST(RecurrentMaskCli, APaddedTextClassifierLearnsTrainsAlikeAndIsNotExportedWrong) {
  const fs::path dir = test::scratch_dir("recurrent-mask");
  auto made = run_command(std::string(test::system_python()) + " -c \"" +
                          "import numpy as np\n"
                          "rng = np.random.default_rng(4)\n"
                          "for n, name in ((2400, 'train'), (400, 'val')):\n"
                          "    lengths = rng.integers(1, 13, size=n)\n"
                          "    x = np.zeros((n, 12), np.float32)\n"
                          "    for i, l in enumerate(lengths):\n"
                          "        x[i, :l] = rng.integers(1, 11, size=l)\n"
                          "    y = (x[np.arange(n), lengths - 1] > 5).astype(np.int64)\n"
                          "    np.savez('" +
                          dir.string() +
                          "/' + name + '.npz', x=x, y=y)\n"
                          "front = np.zeros_like(x)\n"
                          "for i, l in enumerate(lengths):\n"
                          "    front[i, 12 - l:] = x[i, :l]\n"
                          "np.savez('" +
                          dir.string() + "/front.npz', x=front, y=y)\n\"");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const json layers = padded_tokens_through(
      {{"class_name", "LSTM"}, {"config", {{"name", "lstm"}, {"units", 16}}}},
      {{"class_name", "Dense"},
       {"config", {{"name", "out"}, {"units", 1}, {"activation", "sigmoid"}}}});
  const json run = classifier_run(dir, layers, 3, 5);
  test::write_text(dir / "run.json", run.dump(2));
  json front = run;
  front["data"]["validation"]["path"] = (dir / "front.npz").string();
  test::write_text(dir / "front.json", front.dump(2));
  const std::string cli = test::tandem_cli();
  for (const char* plan : {"cpu:1", "cpu:3"}) {
    auto t = run_command(cli + " train " + (dir / "run.json").string() + " --devices " + plan +
                         " --run-dir " + (dir / plan).string() + " -q");
    ASSERT_EQ(t.exit_code, 0) << t.err;
  }
  EXPECT_GE(last_val_accuracy(dir / "cpu:1"), 0.9);
  const auto predict = [&](const char* plan) {
    return run_command(cli + " predict " + (dir / "run.json").string() + " --weights " +
                       (dir / plan / "model.h5").string() + " -o " +
                       (dir / (std::string(plan) + ".npy")).string());
  };
  ASSERT_EQ(predict("cpu:1").exit_code, 0);
  ASSERT_EQ(predict("cpu:3").exit_code, 0);
  ASSERT_EQ(
      run_command(cli + " predict " + (dir / "front.json").string() + " --weights " +
                  (dir / "cpu:1" / "model.h5").string() + " -o " + (dir / "front.npy").string())
          .exit_code,
      0);
  const auto close = [&](const char* a, const char* b, double rtol) {
    return test::npy_close(dir / a, dir / b, rtol, dir);
  };

  EXPECT_TRUE(close("cpu:1.npy", "cpu:3.npy", 1e-5));
  EXPECT_TRUE(close("cpu:1.npy", "front.npy", 1e-6));
  auto e = run_command(cli + " export " + (dir / "cpu:1" / "model.h5").string() + " -o " +
                       (dir / "masked.onnx").string());
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("layer 'lstm' (LSTM) cannot be exported to ONNX: its input carries a mask"),
            std::string::npos)
      << e.err;
  EXPECT_FALSE(fs::exists(dir / "masked.onnx"));
}

// A padded sequence tagger, as Keras' masking guide writes one: Embedding(mask_zero), an LSTM
// returning every step, a softmax per step; each kept step's tag says whether its token is
// above the one before (the first: above 5). The output carries the mask, so the loss and the
// accuracy are Keras' masked means: the run's last val_loss and val_accuracy equal NumPy's,
// computed from the predictions (the loss per validation batch of 32, Σ over the kept steps /
// their count, averaged weighted by the batches' sizes; the accuracy over every kept step). It
// learns (val_accuracy >= 0.9 after one epoch); cpu:3 trains to cpu:1's predictions.
TEST(RecurrentMaskCli, APaddedTaggerLearnsAndReportsKerasMaskedMeans) {
  const fs::path dir = test::scratch_dir("recurrent-tagger");
  const std::string python = test::system_python();
  auto made = run_command(python + " -c \"" +
                          "import numpy as np\n"
                          "rng = np.random.default_rng(6)\n"
                          "for n, name in ((2000, 'train'), (400, 'val')):\n"
                          "    x = np.zeros((n, 12), np.float32)\n"
                          "    y = np.zeros((n, 12), np.int64)\n"
                          "    for i, l in enumerate(rng.integers(1, 13, size=n)):\n"
                          "        x[i, :l] = rng.integers(1, 11, size=l)\n"
                          "        y[i, :l] = x[i, :l] > np.concatenate(([5], x[i, :l - 1]))\n"
                          "    np.savez('" +
                          dir.string() + "/' + name + '.npz', x=x, y=y)\n\"");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const json layers = padded_tokens_through(
      {{"class_name", "LSTM"},
       {"config", {{"name", "lstm"}, {"units", 16}, {"return_sequences", true}}}},
      {{"class_name", "Dense"},
       {"config", {{"name", "tags"}, {"units", 2}, {"activation", "softmax"}}}});
  json run = classifier_run(dir, layers, 5, 1);
  run["loss"] = "sparse_categorical_crossentropy";
  test::write_text(dir / "run.json", run.dump(2));
  const std::string cli = test::tandem_cli();
  for (const char* plan : {"cpu:1", "cpu:3"}) {
    auto t = run_command(cli + " train " + (dir / "run.json").string() + " --devices " + plan +
                         " --run-dir " + (dir / plan).string() + " -q");
    ASSERT_EQ(t.exit_code, 0) << t.err;
    auto p = run_command(cli + " predict " + (dir / "run.json").string() + " --weights " +
                         (dir / plan / "model.h5").string() + " -o " +
                         (dir / (std::string(plan) + ".npy")).string());
    ASSERT_EQ(p.exit_code, 0) << p.err;
  }
  EXPECT_TRUE(test::npy_close(dir / "cpu:1.npy", dir / "cpu:3.npy", 1e-5, dir));
  double val_loss = 0, val_accuracy = 0;
  std::istringstream events(test::read_text(dir / "cpu:1" / "events.jsonl"));
  for (std::string line; std::getline(events, line);) {
    const json e = json::parse(line);
    if (e["event"] != "epoch_ended") continue;
    val_loss = e["logs"]["val_loss"].get<double>();
    val_accuracy = e["logs"]["val_accuracy"].get<double>();
  }
  EXPECT_GE(val_accuracy, 0.9);
  auto numpy = run_command(python + " -c \"" +
                           "import numpy as np\n"
                           "v = np.load('" +
                           (dir / "val.npz").string() +
                           "')\n"
                           "p = np.load('" +
                           (dir / "cpu:1.npy").string() +
                           "').astype(np.float64)\n"
                           "m = v['x'] != 0\n"
                           "q = np.take_along_axis(p, v['y'][..., None], -1)[..., 0]\n"
                           "ce = -np.log(np.clip(q, 1e-7, 1 - 1e-7))\n"
                           "losses = [(ce[b:b + 32] * m[b:b + 32]).sum() / m[b:b + 32].sum() "
                           "for b in range(0, len(m), 32)]\n"
                           "sizes = [len(m[b:b + 32]) for b in range(0, len(m), 32)]\n"
                           "hits = (p.argmax(-1) == v['y']) & m\n"
                           "print(np.average(losses, weights=sizes), hits.sum() / m.sum())\n\"");
  ASSERT_EQ(numpy.exit_code, 0) << numpy.err;
  double want_loss = 0, want_accuracy = 0;
  std::istringstream(numpy.out) >> want_loss >> want_accuracy;
  EXPECT_NEAR(val_loss, want_loss, 1e-4 * want_loss);
  EXPECT_NEAR(val_accuracy, want_accuracy, 1e-6);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
