// keras.io's "Next-frame video prediction with convolutional LSTMs", at a small size and as Keras
// 2 writes its functional config (ConvLSTM2D, BatchNormalization, a 3x3x3 Conv3D with a sigmoid,
// frames of any count: the time axis left null), trained through the CLI on clips NumPy draws (a
// square moving by a fixed step): it predicts each next frame far better than the frame it sees,
// an epoch on cpu:3 predicts what one on cpu:1 does, and a clip of another length is predicted
// with the same weights.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;

// clips-{train,val}.npz: 6 frames of 10x10 in which a 2x2 square moves by (dy, dx) in
// {-1, 0, 1}² each frame from a random start; x the first 5 frames, y the last 5 (each x frame's
// next one). long.npz: 9 frames of the same (x 8, y 8).
constexpr const char* kClips = R"PY(
import sys, numpy as np
rng = np.random.default_rng(5)
def clips(n, frames):
    v = np.zeros((n, frames, 10, 10, 1), np.float32)
    for i in range(n):
        y, x = rng.integers(2, 7, size=2)
        dy, dx = rng.integers(-1, 2, size=2)
        for t in range(frames):
            r, c = (y + dy * t) % 9, (x + dx * t) % 9
            v[i, t, r:r + 2, c:c + 2, 0] = 1.0
    return v[:, :-1], v[:, 1:]
for n, name, frames in ((512, "train", 6), (128, "val", 6), (16, "long", 9)):
    x, y = clips(n, frames)
    np.savez(f"{sys.argv[1]}/clips-{name}.npz", x=x, y=y)
)PY";

TEST(NextFrameCli, ConvolutionalLstmsLearnWhereTheSquareMovesAlikeOnCpu3) {
  const fs::path dir = test::scratch_dir("next-frame-cli");
  auto made = test::run_python(dir / "clips.py", kClips, dir.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const json lstm = {{"filters", 8},
                     {"kernel_size", {3, 3}},
                     {"padding", "same"},
                     {"return_sequences", true},
                     {"activation", "relu"}};
  const json layers = {
      test::keras2_node("InputLayer", "input_1", {{"batch_input_shape", {nullptr, nullptr, 10, 10, 1}}},
           nullptr),
      test::keras2_node("ConvLSTM2D", "conv_lstm2d", lstm, "input_1"),
      test::keras2_node("BatchNormalization", "batch_normalization", {{"synchronized", true}, {"momentum", 0.9}},
           "conv_lstm2d"),
      test::keras2_node("ConvLSTM2D", "conv_lstm2d_1", lstm, "batch_normalization"),
      test::keras2_node("Conv3D", "conv3d",
           {{"filters", 1}, {"kernel_size", {3, 3, 3}}, {"padding", "same"},
            {"activation", "sigmoid"}},
           "conv_lstm2d_1")};
  const json model = {{"class_name", "Functional"},
                      {"config",
                       {{"name", "next_frame"},
                        {"layers", layers},
                        {"input_layers", {{"input_1", 0, 0}}},
                        {"output_layers", {{"conv3d", 0, 0}}}}},
                      {"keras_version", "2.15.0"},
                      {"backend", "tensorflow"}};
  const json run = {
      {"name", "next-frame"},
      {"seed", 1},
      {"epochs", 8},
      {"batch_size", 16},
      {"model", model},
      {"loss", "binary_crossentropy"},
      {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
      {"data",
       {{"train", {{"type", "npz"}, {"path", (dir / "clips-train.npz").string()}}},
        {"validation", {{"type", "npz"}, {"path", (dir / "clips-val.npz").string()}}}}}};
  auto trained = test::train_in(dir, "run", run);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const json history = test::run_history(dir / "run");
  ASSERT_EQ(history.size(), 8u);
  // Measured 0.0049. By NumPy on the validation clips: the frame it sees, as the prediction of
  // the next, scores 0.76 binary crossentropy; the best constant (0.04, the square's share of the
  // cells) 0.168.
  EXPECT_LT(history.back()["val_loss"].get<double>(), 0.02) << history.dump();

  // The same weights predict clips of 8 frames (the null time axis takes the data's).
  json long_run = run;
  long_run["data"]["test"] = {{"type", "npz"}, {"path", (dir / "clips-long.npz").string()}};
  test::write_text(dir / "long.json", long_run.dump());
  auto evaluated = test::run_command(test::tandem_cli() + " evaluate " +
                                     (dir / "long.json").string() + " --weights " +
                                     (dir / "run" / "model.h5").string() + " --split test");
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  EXPECT_NE(evaluated.out.find("loss"), std::string::npos) << evaluated.out;

  // Contract 1: an epoch on cpu:3 predicts what an epoch on cpu:1 predicts.
  for (const char* plan : {"cpu:1", "cpu:3"}) {
    auto r = test::train_and_predict(dir, plan, run, std::string("--set epochs=1 --devices ") + plan);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_TRUE(test::npy_close(dir / "cpu:3.npy", dir / "cpu:1.npy", 1e-5, dir));
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
