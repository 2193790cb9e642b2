// keras.io's "3D image classification from CT scans" network, at a small size and as Keras 2
// writes its functional config (Conv3D, MaxPool3D, BatchNormalization, GlobalAveragePooling3D,
// Dense, Dropout), trained through the CLI on volumes NumPy draws: it learns to tell a cube from a
// bar of the same brightness, cpu:3 trains to cpu:1's predictions (synchronized statistics), and
// h5py reads the checkpoint's kernels in Keras' (kd, kh, kw, in, filters) layout.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;

// volumes-{train,val}.npz: 8x8x8 volumes of noise holding, at a random place, either a 3x3x3
// cube (label 1) or a 1x3x9-voxel bar folded to 1x3x8 plus one voxel (label 0) of the same
// brightness, so only the shape tells them apart.
constexpr const char* kVolumes = R"PY(
import sys, numpy as np
rng = np.random.default_rng(7)
for n, name in ((640, "train"), (160, "val")):
    x = rng.normal(0, 0.3, size=(n, 8, 8, 8, 1)).astype(np.float32)
    y = rng.integers(0, 2, size=(n, 1)).astype(np.float32)
    for i in range(n):
        if y[i, 0] == 1:
            d, r, c = rng.integers(0, 6, size=3)
            x[i, d:d + 3, r:r + 3, c:c + 3, 0] += 1.0
        else:
            d, r = rng.integers(0, 8), rng.integers(0, 6)
            x[i, d, r:r + 3, :, 0] += 1.0
            x[i, (d + 4) % 8, r, 0, 0] += 1.0
    np.savez(f"{sys.argv[1]}/volumes-{name}.npz", x=x, y=y)
)PY";

TEST(VolumeCli, TheCtScanClassifierLearnsShapesInThreeDimensionsAlikeOnCpu3) {
  const fs::path dir = test::scratch_dir("volume-cli");
  auto made = test::run_python(dir / "volumes.py", kVolumes, dir.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const json layers = {
      test::keras2_node("InputLayer", "input_1", {{"batch_input_shape", {nullptr, 8, 8, 8, 1}}}, nullptr),
      test::keras2_node("Conv3D", "conv3d", {{"filters", 8}, {"kernel_size", 3}, {"activation", "relu"}},
           "input_1"),
      test::keras2_node("MaxPooling3D", "max_pooling3d", {{"pool_size", 2}}, "conv3d"),
      test::keras2_node("BatchNormalization", "batch_normalization", {{"synchronized", true}},
           "max_pooling3d"),
      test::keras2_node("Conv3D", "conv3d_1",
           {{"filters", 16}, {"kernel_size", 3}, {"padding", "same"}, {"activation", "relu"}},
           "batch_normalization"),
      test::keras2_node("GlobalAveragePooling3D", "global_average_pooling3d", json::object(), "conv3d_1"),
      test::keras2_node("Dense", "dense", {{"units", 16}, {"activation", "relu"}}, "global_average_pooling3d"),
      test::keras2_node("Dropout", "dropout", {{"rate", 0.2}}, "dense"),
      test::keras2_node("Dense", "dense_1", {{"units", 1}, {"activation", "sigmoid"}}, "dropout")};
  const json model = {{"class_name", "Functional"},
                      {"config",
                       {{"name", "3dcnn"},
                        {"layers", layers},
                        {"input_layers", {{"input_1", 0, 0}}},
                        {"output_layers", {{"dense_1", 0, 0}}}}},
                      {"keras_version", "2.15.0"},
                      {"backend", "tensorflow"}};
  const json run = {
      {"name", "3dcnn"},
      {"seed", 3},
      {"epochs", 6},
      {"batch_size", 32},
      {"model", model},
      {"loss", "binary_crossentropy"},
      {"metrics", {"accuracy"}},
      {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
      {"data",
       {{"train", {{"type", "npz"}, {"path", (dir / "volumes-train.npz").string()}}},
        {"validation", {{"type", "npz"}, {"path", (dir / "volumes-val.npz").string()}}}}}};
  auto trained = test::train_in(dir, "run", run);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const json history = test::run_history(dir / "run");
  ASSERT_EQ(history.size(), 6u);
  // Measured 0.9625 (train accuracy 1.0 from the third epoch); guessing scores 0.5.
  EXPECT_GE(history.back()["val_accuracy"].get<double>(), 0.9) << history.dump();
  // Contract 1: an epoch on cpu:3 predicts what an epoch on cpu:1 predicts (after more steps
  // the two drift apart by their rounding, as any two summation orders do: 1e-3 after six).
  for (const char* plan : {"cpu:1", "cpu:3"}) {
    auto r = test::train_and_predict(dir, plan, run, std::string("--set epochs=1 --devices ") + plan);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_TRUE(test::npy_close(dir / "cpu:3.npy", dir / "cpu:1.npy", 1e-5, dir));

  // Keras' layout, read by h5py: kernels (kd, kh, kw, in, filters), the model a Functional one.
  auto read = test::run_python(
      dir / "read.py",
      "import sys, json, h5py\n"
      "f = h5py.File(sys.argv[1], 'r')\n"
      "print(f['model_weights/conv3d/conv3d/kernel:0'].shape,"
      " f['model_weights/conv3d_1/conv3d_1/kernel:0'].shape,"
      " json.loads(f.attrs['model_config'])['class_name'])\n",
      (dir / "run" / "model.h5").string());
  ASSERT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, "(3, 3, 3, 1, 8) (3, 3, 3, 8, 16) Functional\n");
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
