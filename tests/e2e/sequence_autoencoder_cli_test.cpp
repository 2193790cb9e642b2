// An LSTM autoencoder as Keras 2 tutorials write one — an LSTM encodes a sequence into a vector,
// RepeatVector feeds it to every step of a decoder LSTM, a TimeDistributed Dense reads each step
// back — trained through the CLI with mse on (steps, features) targets: it learns to reconstruct
// sine waves far better than their mean does, and cpu:3 trains to cpu:1's weights. So does
// keras.io's convolutional one (Conv1D down, Conv1DTranspose up).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;

// waves-train.npz and waves-val.npz: 12 steps of (sin, cos) of a random frequency and phase;
// the targets are the inputs.
constexpr const char* kWaves = R"PY(
import sys, numpy as np
rng = np.random.default_rng(11)
for n, name in ((1000, "train"), (200, "val")):
    t = np.arange(12)[None, :]
    w = rng.uniform(0.2, 0.8, size=(n, 1))
    p = rng.uniform(0, 2 * np.pi, size=(n, 1))
    x = np.stack([np.sin(w * t + p), np.cos(w * t + p)], axis=-1).astype(np.float32)
    np.savez(f"{sys.argv[1]}/waves-{name}.npz", x=x, y=x)
)PY";

json layer(const char* cls, json config) {
  return {{"class_name", cls}, {"config", config}};
}

TEST(SequenceAutoencoderCli, AnLstmAutoencoderReconstructsItsSequencesAlikeOnCpu3) {
  const fs::path dir = test::scratch_dir("sequence-autoencoder");
  auto made = test::run_python(dir / "waves.py", kWaves, dir.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const json dense = {{"class_name", "Dense"}, {"config", {{"name", "dense"}, {"units", 2}}}};
  const json model = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "autoencoder"},
        {"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 12, 2}}, {"name", "waves"}}),
          layer("LSTM", {{"name", "encoder"}, {"units", 16}}),
          layer("RepeatVector", {{"name", "repeat"}, {"n", 12}}),
          layer("LSTM", {{"name", "decoder"}, {"units", 16}, {"return_sequences", true}}),
          layer("TimeDistributed", {{"name", "steps"}, {"layer", dense}})}}}},
      {"keras_version", "2.15.0"}};
  const json run = {
      {"name", "autoencoder"},
      {"seed", 2},
      {"epochs", 8},
      {"batch_size", 32},
      {"model", model},
      {"loss", "mse"},
      {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
      {"data",
       {{"train", {{"type", "npz"}, {"path", (dir / "waves-train.npz").string()}}},
        {"validation", {{"type", "npz"}, {"path", (dir / "waves-val.npz").string()}}}}}};
  for (const char* plan : {"cpu:1", "cpu:3"}) {
    auto r = test::train_in(dir, plan, run, std::string("--devices ") + plan);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto p = test::run_command(test::tandem_cli() + " predict " +
                               (dir / (std::string(plan) + ".json")).string() + " --weights " +
                               (dir / plan / "model.h5").string() + " -o " +
                               (dir / (std::string(plan) + ".npy")).string());
    ASSERT_EQ(p.exit_code, 0) << p.err;
  }
  const json history = test::run_history(dir / "cpu:1");
  ASSERT_EQ(history.size(), 8u);
  // Measured 0.010; predicting every value's mean (0) scores the mean square, 0.5.
  EXPECT_LT(history.back()["val_loss"].get<double>(), 0.03) << history.dump();
  EXPECT_TRUE(test::npy_close(dir / "cpu:3.npy", dir / "cpu:1.npy", 1e-5, dir));
}

// keras.io's time-series anomaly autoencoder ("Timeseries anomaly detection using an
// Autoencoder"), as Keras 3 writes its Sequential config, on the same waves: two strided Conv1D
// down to a quarter of the steps, Conv1DTranspose back up, inputs of any length (None steps).
TEST(SequenceAutoencoderCli, KerasIosConvolutionalAutoencoderReconstructsItsSequences) {
  const fs::path dir = test::scratch_dir("conv-autoencoder");
  auto made = test::run_python(dir / "waves.py", kWaves, dir.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const auto conv = [](const char* cls, const char* name, int filters, int strides,
                       const char* activation) {
    return layer(cls, {{"name", name},
                       {"filters", filters},
                       {"kernel_size", {7}},
                       {"strides", {strides}},
                       {"padding", "same"},
                       {"activation", activation}});
  };
  const json model = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "sequential"},
        {"layers",
         {layer("InputLayer", {{"batch_shape", {nullptr, nullptr, 2}}, {"name", "input_layer"}}),
          conv("Conv1D", "conv1d", 32, 2, "relu"),
          layer("Dropout", {{"name", "dropout"}, {"rate", 0.2}}),
          conv("Conv1D", "conv1d_1", 16, 2, "relu"),
          conv("Conv1DTranspose", "conv1d_transpose", 16, 2, "relu"),
          layer("Dropout", {{"name", "dropout_1"}, {"rate", 0.2}}),
          conv("Conv1DTranspose", "conv1d_transpose_1", 32, 2, "relu"),
          conv("Conv1DTranspose", "conv1d_transpose_2", 2, 1, "linear")}}}}};
  const json run = {
      {"name", "conv-autoencoder"},
      {"seed", 2},
      {"epochs", 8},
      {"batch_size", 32},
      {"model", model},
      {"loss", "mse"},
      {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.003}}}}},
      {"data",
       {{"train", {{"type", "npz"}, {"path", (dir / "waves-train.npz").string()}}},
        {"validation", {{"type", "npz"}, {"path", (dir / "waves-val.npz").string()}}}}}};
  auto r = test::train_in(dir, "run", run);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json history = test::run_history(dir / "run");
  ASSERT_EQ(history.size(), 8u);
  // Measured 0.0045; predicting every value's mean (0) scores the mean square, 0.5.
  EXPECT_LT(history.back()["val_loss"].get<double>(), 0.05) << history.dump();
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
