// A Keras Normalization layer whose statistics adapt() computed: Keras writes its config with
// mean and variance null and keeps the statistics as the layer's weights mean, variance (one per
// feature) and count (an int64 scalar). Files in Keras 2's and Keras 3's layouts, written by h5py
// as Keras writes them, predict what NumPy computes from the same numbers; training keeps the
// statistics; the ONNX export computes what Tandem does (OpenCV runs it); a fresh run adapts the
// layer to the training data as Keras' adapt() does; half the statistics in the config is
// refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// Writes data.npz, the weights in both layouts and NumPy's outputs (float64 arithmetic).
constexpr const char* kMake = R"PY(
import sys, h5py, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(5)
mean = np.array([0.1, 49.0, -2.1, 0.8], np.float32)
variance = np.array([1.2, 95.0, 0.0, 8.5], np.float32)  # a constant feature: the 1e-7 floor
x = (rng.normal(size=(24, 4)) * [1, 10, 0, 3] + [0, 50, 0, 1]).astype(np.float32)
x[:, 2] = mean[2]  # 0 / 1e-7, not 0 / 0
np.savez(f"{out}/data.npz", x=x, y=rng.integers(0, 3, size=24).astype(np.int64))
kernel = rng.normal(size=(4, 3)).astype(np.float32)
bias = rng.normal(size=3).astype(np.float32)
with h5py.File(f"{out}/keras2.h5", "w") as f:
    f.attrs["keras_version"] = b"2.15.0"
    f.attrs["backend"] = b"tensorflow"
    f.attrs["layer_names"] = [b"normalization", b"dense"]
    norm = f.create_group("normalization")
    norm.attrs["weight_names"] = [b"normalization/mean:0", b"normalization/variance:0",
                                  b"normalization/count:0"]
    norm.create_dataset("normalization/mean:0", data=mean)
    norm.create_dataset("normalization/variance:0", data=variance)
    norm.create_dataset("normalization/count:0", data=np.int64(60000))
    dense = f.create_group("dense")
    dense.attrs["weight_names"] = [b"dense/kernel:0", b"dense/bias:0"]
    dense.create_dataset("dense/kernel:0", data=kernel)
    dense.create_dataset("dense/bias:0", data=bias)
with h5py.File(f"{out}/keras3.weights.h5", "w") as f:
    layers = f.create_group("layers")
    f.create_group("vars")
    for group, values in (("normalization", (mean, variance, np.int64(60000))),
                          ("dense", (kernel, bias))):
        v = layers.create_group(group).create_group("vars")
        for i, value in enumerate(values):
            v.create_dataset(str(i), data=value)
z = (x.astype(np.float64) - mean) / np.maximum(np.sqrt(variance.astype(np.float64)), 1e-7)
logits = z @ kernel.astype(np.float64) + bias
e = np.exp(logits - logits.max(axis=1, keepdims=True))
np.save(f"{out}/expected.npy", e / e.sum(axis=1, keepdims=True))
)PY";

json adapted_model_config() {
  const json normalization = {{"class_name", "Normalization"},
                              {"config",
                               {{"name", "normalization"},
                                {"axis", {-1}},
                                {"mean", nullptr},
                                {"variance", nullptr},
                                {"invert", false}}}};
  const json dense = {{"class_name", "Dense"},
                      {"config", {{"name", "dense"}, {"units", 3}, {"activation", "softmax"}}}};
  const json input = {{"class_name", "InputLayer"},
                      {"config", {{"name", "input_1"}, {"batch_input_shape", {nullptr, 4}}}}};
  json config = {{"name", "sequential"}};
  config["layers"] = json::array({input, normalization, dense});
  return {{"class_name", "Sequential"}, {"config", config}};
}

json run_config(const fs::path& dir) {
  const json data = {{"type", "npz"}, {"path", (dir / "data.npz").string()}};
  return {{"name", "adapted"},
          {"seed", 1},
          {"epochs", 1},
          {"batch_size", 8},
          {"model", adapted_model_config()},
          {"loss", "sparse_categorical_crossentropy"},
          {"optimizer", {{"class_name", "SGD"}, {"config", {{"learning_rate", 0.1}}}}},
          {"data", {{"train", data}, {"validation", data}}}};
}

class AdaptedNormalizationCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch_dir("adapted-normalization");
    auto made = test::run_python(dir_ / "make.py", kMake, dir_.string());
    ASSERT_EQ(made.exit_code, 0) << made.err;
    test::write_text(dir_ / "run.json", run_config(dir_).dump(2));
  }
  // Whether `got` (.npy) is within `rtol` of `want`.
  ::testing::AssertionResult close(const fs::path& got, const fs::path& want, double rtol) {
    return test::npy_close(got, want, rtol, dir_);
  }
  test::CommandResult predict(const fs::path& config, const fs::path& weights,
                              const fs::path& output) {
    return run_command(test::tandem_cli() + " predict " + config.string() + " --weights " +
                       weights.string() + " -o " + output.string());
  }
  fs::path dir_;
};

TEST_F(AdaptedNormalizationCli, KerasTwoAndThreeFilesPredictAsNumPyComputes) {
  for (const char* file : {"keras2.h5", "keras3.weights.h5"}) {
    SCOPED_TRACE(file);
    const fs::path output = dir_ / (std::string(file) + ".npy");
    auto r = predict(dir_ / "run.json", dir_ / file, output);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(close(output, dir_ / "expected.npy", 1e-6));
  }
}

// Writes seq.npz (24 sequences of 5 steps of 4 features) and NumPy's statistics of the features
// over samples and steps, as Keras' adapt() computes them.
constexpr const char* kSequences = R"PY(
import sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(9)
x = (rng.normal(size=(24, 5, 4)) * [1, 10, 0.1, 3] + [0, 50, -2, 1]).astype(np.float32)
np.savez(f"{out}/seq.npz", x=x, y=rng.integers(0, 3, size=24).astype(np.int64))
flat = x.reshape(-1, 4).astype(np.float64)
np.save(f"{out}/seq_mean.npy", flat.mean(axis=0))
np.save(f"{out}/seq_variance.npy", flat.var(axis=0))
)PY";

TEST_F(AdaptedNormalizationCli, AFreshRunAdaptsTheLayerToTheTrainingDataAsKerasDoes) {
  auto made = test::run_python(dir_ / "seq.py", kSequences, dir_.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  json config = run_config(dir_);
  for (const char* split : {"train", "validation"})
    config["data"][split]["path"] = (dir_ / "seq.npz").string();
  json& layers = config["model"]["config"]["layers"];
  layers[0]["config"]["batch_input_shape"] = {nullptr, 5, 4};
  layers.insert(layers.begin() + 2,
                json{{"class_name", "Flatten"}, {"config", {{"name", "flatten"}}}});
  test::write_text(dir_ / "seq.json", config.dump(2));
  auto r = run_command(test::tandem_cli() + " train " + (dir_ / "seq.json").string() +
                       " --run-dir " + (dir_ / "seq").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("adapted layer 'normalization' (Normalization) to the training data, as "
                       "Keras' adapt() does: the mean and variance of each of its 4 features "
                       "over 24 samples (120 values each)"),
            std::string::npos)
      << r.err;
  // The checkpoint holds NumPy's figures (to float32 rounding) and the count.
  auto check = run_command(std::string(test::system_python()) + " -c \"" +
                           "import h5py, numpy as np\n"
                           "w = h5py.File('" +
                           (dir_ / "seq" / "model.h5").string() +
                           "', 'r')['model_weights/normalization/normalization']\n"
                           "for k in ('mean', 'variance'):\n"
                           "    want = np.load('" +
                           dir_.string() +
                           "/seq_' + k + '.npy')\n"
                           "    got = w[k + ':0'][()]\n"
                           "    assert np.allclose(got, want, rtol=1e-6, atol=0), (k, got, want)\n"
                           "assert float(w['count:0'][()]) == 120\n\"");
  EXPECT_EQ(check.exit_code, 0) << check.err;

  // A layer called on another layer's output is no data's: it is left as the identity, said.
  std::swap(layers[1], layers[2]);  // Normalization after the Flatten
  test::write_text(dir_ / "late.json", config.dump(2));
  r = run_command(test::tandem_cli() + " train " + (dir_ / "late.json").string() + " --run-dir " +
                  (dir_ / "late").string() + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("layer 'normalization' (Normalization) keeps its statistics as weights "
                       "(mean and variance null in its config, as Keras writes an adapted layer) "
                       "and none are loaded, but it is not called once on one of the model's "
                       "inputs"),
            std::string::npos)
      << r.err;
}

TEST_F(AdaptedNormalizationCli, TrainingKeepsTheStatisticsAndTheExportComputesTheSame) {
  auto r =
      run_command(test::tandem_cli() + " train " + (dir_ / "run.json").string() + " --weights " +
                  (dir_ / "keras2.h5").string() + " --run-dir " + (dir_ / "run").string() + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("adapt"), std::string::npos) << r.err;  // the weights were loaded
  const fs::path model = dir_ / "run" / "model.h5";
  // The checkpoint keeps the statistics as Keras does (h5py reads them back unchanged) and the
  // config with mean and variance null; the Dense layer trained.
  auto check = run_command(std::string(test::system_python()) + " -c \"" +
                           "import h5py, json, numpy as np\n"
                           "a = h5py.File('" +
                           model.string() +
                           "', 'r')['model_weights']\n"
                           "b = h5py.File('" +
                           (dir_ / "keras2.h5").string() +
                           "', 'r')\n"
                           "for w in ('mean:0', 'variance:0'):\n"
                           "    k = 'normalization/normalization/' + w\n"
                           "    assert np.array_equal(a[k][()], b[k][()]), w\n"
                           "assert float(a['normalization/normalization/count:0'][()]) == 60000\n"
                           "k = 'dense/dense/kernel:0'\n"
                           "assert not np.array_equal(a[k][()], b[k][()])\n"
                           "c = json.loads(h5py.File('" +
                           model.string() +
                           "', 'r').attrs['model_config'])\n"
                           "n = c['config']['layers'][1]['config']\n"
                           "assert n['mean'] is None and n['variance'] is None, n\n\"");
  EXPECT_EQ(check.exit_code, 0) << check.err;
  // The checkpoint predicts by itself (its stored config), and its ONNX export, run by OpenCV,
  // gives the same outputs.
  auto p = predict(dir_ / "run.json", model, dir_ / "tandem.npy");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto e = run_command(test::tandem_cli() + " export " + model.string() + " -o " +
                       (dir_ / "model.onnx").string());
  ASSERT_EQ(e.exit_code, 0) << e.err;
  auto o = run_command(std::string(test::system_python()) + " -c \"" +
                       "import cv2, numpy as np\n"
                       "net = cv2.dnn.readNetFromONNX('" +
                       (dir_ / "model.onnx").string() +
                       "')\n"
                       "net.setInput(np.load('" +
                       (dir_ / "data.npz").string() +
                       "')['x'])\n"
                       "np.save('" +
                       (dir_ / "onnx.npy").string() + "', net.forward())\n\"");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(close(dir_ / "onnx.npy", dir_ / "tandem.npy", 1e-5));
}

TEST_F(AdaptedNormalizationCli, HalfTheStatisticsInTheConfigIsExitTwoNamingTheOther) {
  json config = run_config(dir_);
  config["model"]["config"]["layers"][1]["config"]["mean"] = {0, 1, 2, 3};
  test::write_text(dir_ / "half.json", config.dump());
  auto r = run_command(test::tandem_cli() + " check " + (dir_ / "half.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("model.config.layers[1].config.variance"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("give both mean and variance"), std::string::npos) << r.err;
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
