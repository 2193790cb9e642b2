// Keras' activity_regularizer through the `tandem` binary, against PyTorch: a hidden Dense with
// L1L2 on its (relu) output and an output layer with L2 on its softmax. The step's reported loss
// is Keras' — the cross-entropy mean plus each penalty's sum over the batch, divided by the
// batch size in a Keras 2 model (tf.keras' base layer divides) and undivided in a Keras 3 one
// (Keras 3 adds the regularizer's value as it is) — one SGD step moves the weights as
// PyTorch's autograd of that loss does, on one replica and on three, `evaluate` counts the
// penalties too, and the regularizer is written back into the checkpoint's model_config. Keras'
// ActivityRegularization layer penalizes as the regularizer on the layer before it. A bad
// regularizer is refused at its key.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

constexpr const char* kWriteData = R"PY(
import sys, h5py, numpy as np
rng = np.random.default_rng(3)
x = rng.normal(size=(48, 4)).astype(np.float32)
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = x
    f["y"] = (x.sum(axis=1) > 0).astype(np.int64) + (x[:, 0] > 1).astype(np.int64)
)PY";

json run_config(const fs::path& data, double learning_rate, bool keras2 = false) {
  json model = json::parse(R"({"class_name": "Sequential", "config": {"name": "act", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4], "name": "x"}},
    {"class_name": "Dense", "config": {"name": "hidden", "units": 6, "activation": "relu",
     "activity_regularizer": {"class_name": "L1L2", "config": {"l1": 0.01, "l2": 0.02}}}},
    {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax",
     "activity_regularizer": {"class_name": "L2", "config": {"l2": 0.05}}}}]}})");
  if (keras2) model["keras_version"] = "2.15.0";
  return {{"name", "activity"},
          {"seed", 2},
          {"epochs", 1},
          {"batch_size", 48},
          {"optimizer", {{"class_name", "SGD"}, {"config", {{"learning_rate", learning_rate}}}}},
          {"loss", "sparse_categorical_crossentropy"},
          {"model", model},
          {"data",
           {{"train", {{"type", "hdf5"}, {"path", data.string()}, {"x", "x"}, {"y", "y"}}},
            {"shuffle", false}}}};
}

// Reads the history's loss and the weights of both checkpoints; computes with PyTorch the loss
// at the first's weights and one SGD step of `lr` from them; prints what differs, or "ok". The
// penalties are divided by the batch size when the last argument is "keras2".
constexpr const char* kCheck = R"PY(
import sys, json, h5py, torch
data, before, after, events, lr = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
keras2 = sys.argv[6] == "keras2"
d = h5py.File(data, "r")
x = torch.tensor(d["x"][()], dtype=torch.float64)
y = torch.tensor(d["y"][()])
def weights(path):
    m = h5py.File(path, "r")["model_weights"]
    return [torch.tensor(m[l][l][w][()], dtype=torch.float64) for l in ("hidden", "out") for w in ("kernel:0", "bias:0")]
def loss_of(w):
    h = torch.relu(x @ w[0] + w[1])
    p = torch.softmax(h @ w[2] + w[3], dim=1)
    ce = -torch.log(p.clamp(1e-7, 1 - 1e-7)[torch.arange(len(y)), y]).mean()
    n = len(y) if keras2 else 1
    return ce + (0.01 * h.abs().sum() + 0.02 * (h * h).sum()) / n + 0.05 * (p * p).sum() / n
w0 = [t.clone().requires_grad_(True) for t in weights(before)]
loss = loss_of(w0)
loss.backward()
history = [json.loads(l) for l in open(events) if '"run_finished"' in l][-1]["history"]
errors = []
if abs(history[0]["loss"] - loss.item()) > 1e-5 * abs(loss.item()):
    errors.append("loss %r, torch %r" % (history[0]["loss"], loss.item()))
for i, (w, w1) in enumerate(zip(w0, weights(after))):
    want = w.detach() - lr * w.grad
    if not torch.allclose(w1, want, rtol=1e-5, atol=1e-6):
        errors.append("weight %d off by %g" % (i, (w1 - want).abs().max().item()))
config = json.loads(h5py.File(after, "r").attrs["model_config"])
reg = config["config"]["layers"][1]["config"].get("activity_regularizer")
if not reg or reg["config"]["l2"] != 0.02:
    errors.append("model_config activity_regularizer %r" % (reg,))
print("\n".join(errors) if errors else "ok")
)PY";

struct ActivityRegularizerCli : ::testing::Test {
  void SetUp() override {
    dir = test::scratch_dir("activity-cli");
    data = dir / "data.h5";
    test::write_text(dir / "check.py", kCheck);
    auto w = test::run_python(dir / "write.py", kWriteData, data.string());
    ASSERT_EQ(w.exit_code, 0) << w.err;
  }
  test::CommandResult train(const std::string& name, const json& config,
                            const std::string& extra = "") {
    return test::train_in(dir, name, config, extra);
  }
  fs::path dir, data;
};

TEST_F(ActivityRegularizerCli, PenaltiesCountInTheLossAndTheStepAsPyTorchComputesThem) {
  for (const bool keras2 : {false, true}) {
    const std::string generation = keras2 ? "keras2" : "keras3";
    SCOPED_TRACE(generation);
    // A learning rate of 1e-30 (0 is refused) moves no weight measurably: the checkpoint holds
    // the initial weights, and its one step's loss is the loss at them.
    const std::string start_name = "start-" + generation;
    auto start = train(start_name, run_config(data, 1e-30, keras2));
    ASSERT_EQ(start.exit_code, 0) << start.err;
    const std::string weights = " --weights " + (dir / start_name / "model.h5").string();
    for (const char* devices : {"cpu:1", "cpu:3"}) {
      SCOPED_TRACE(devices);
      const std::string name = "step-" + generation + "-" + devices[4];
      auto step = train(name, run_config(data, 0.5, keras2), weights + " --devices " + devices);
      ASSERT_EQ(step.exit_code, 0) << step.err;
      auto check =
          run_command(std::string(test::system_python()) + " " + (dir / "check.py").string() + " " +
                      data.string() + " " + (dir / start_name / "model.h5").string() + " " +
                      (dir / name / "model.h5").string() + " " +
                      (dir / name / "events.jsonl").string() + " 0.5 " + generation);
      ASSERT_EQ(check.exit_code, 0) << check.err;
      EXPECT_EQ(check.out, "ok\n");
    }
    // evaluate counts the penalties too: at the start's weights, the start's training loss.
    auto ev = run_command(test::tandem_cli() + " evaluate " +
                          (dir / (start_name + ".json")).string() + weights + " --split train -q");
    ASSERT_EQ(ev.exit_code, 0) << ev.err;
    const double trained = test::run_history(dir / start_name)[0]["loss"].get<double>();
    EXPECT_NEAR(json::parse(ev.out)["loss"].get<double>(), trained, 1e-6 * trained);
  }
}

// Keras' ActivityRegularization layer after the hidden Dense penalizes as the regularizer on that
// Dense does: from the same weights, one step's loss and the moved weights are the same (Keras 3
// and Keras 2 alike), and the layer is written back with its l1 and l2 and no regularizer key.
constexpr const char* kCompare = R"PY(
import sys, json, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
errors = []
for layer in ("hidden", "out"):
    for w in ("kernel:0", "bias:0"):
        x, y = a["model_weights"][layer][layer][w][()], b["model_weights"][layer][layer][w][()]
        if not np.allclose(x, y, rtol=1e-6, atol=1e-7):
            errors.append("%s/%s off by %g" % (layer, w, np.abs(x - y).max()))
layers = json.loads(b.attrs["model_config"])["config"]["layers"]
penalty = [l for l in layers if l["class_name"] == "ActivityRegularization"]
if len(penalty) != 1 or penalty[0]["config"].get("l1") != 0.01 or penalty[0]["config"].get("l2") != 0.02 \
        or "activity_regularizer" in penalty[0]["config"]:
    errors.append("written back as %r" % (penalty,))
print("\n".join(errors) if errors else "ok")
)PY";

TEST_F(ActivityRegularizerCli, AnActivityRegularizationLayerPenalizesAsTheRegularizerItFollows) {
  test::write_text(dir / "compare.py", kCompare);
  for (const bool keras2 : {false, true}) {
    const std::string generation = keras2 ? "keras2" : "keras3";
    SCOPED_TRACE(generation);
    auto start = train("start-" + generation, run_config(data, 1e-30, keras2));
    ASSERT_EQ(start.exit_code, 0) << start.err;
    json layered = run_config(data, 0.5, keras2);
    json& layers = layered["model"]["config"]["layers"];
    layers[1]["config"].erase("activity_regularizer");
    layers.insert(layers.begin() + 2,
                  json{{"class_name", "ActivityRegularization"},
                       {"config", {{"name", "penalty"}, {"l1", 0.01}, {"l2", 0.02}}}});
    const std::string weights =
        " --weights " + (dir / ("start-" + generation) / "model.h5").string();
    auto as_key = train("as-key-" + generation, run_config(data, 0.5, keras2), weights);
    ASSERT_EQ(as_key.exit_code, 0) << as_key.err;
    auto as_layer = train("as-layer-" + generation, layered, weights + " --devices cpu:3");
    ASSERT_EQ(as_layer.exit_code, 0) << as_layer.err;
    const double key_loss = test::run_history(dir / ("as-key-" + generation))[0]["loss"];
    const double layer_loss = test::run_history(dir / ("as-layer-" + generation))[0]["loss"];
    EXPECT_NEAR(layer_loss, key_loss, 1e-6 * key_loss);
    auto compare =
        run_command(std::string(test::system_python()) + " " + (dir / "compare.py").string() + " " +
                    (dir / ("as-key-" + generation) / "model.h5").string() + " " +
                    (dir / ("as-layer-" + generation) / "model.h5").string());
    ASSERT_EQ(compare.exit_code, 0) << compare.err;
    EXPECT_EQ(compare.out, "ok\n");
  }
  json bad = run_config(data, 0.1);
  bad["model"]["config"]["layers"].push_back(
      {{"class_name", "ActivityRegularization"}, {"config", {{"l2", -0.5}}}});
  auto refused = train("bad-layer", bad);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("model.config.layers[3].config.l2"), std::string::npos) << refused.err;
}

TEST_F(ActivityRegularizerCli, ABadRegularizerIsRefusedAtItsKey) {
  json config = run_config(data, 0.1);
  config["model"]["config"]["layers"][1]["config"]["activity_regularizer"] = {
      {"class_name", "L2"}, {"config", {{"l2", -1}}}};
  auto r = train("bad", config);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("model.config.layers[1].config.activity_regularizer"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "bad"));
}

}  // namespace
}  // namespace tandem
