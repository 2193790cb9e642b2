// Image folders from the command line. Fashion-MNIST written out by PIL as PNG files trains
// fashion-cnn to the accuracy the same samples give as IDX files (PNG is lossless: the pixels
// are the same; only the files' order differs); the example config resources/configs/
// fashion-photos.json, with its augmentation layers, trains on JPEG folders, and its checkpoint
// names the classes (tandem inspect).
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kSamples = 12000;

void write_folders(const fs::path& out, const std::string& split, int count,
                   const std::string& format, const std::string& idx_prefix = "") {
  const fs::path f = test::fashion_mnist_dir();
  const auto r =
      test::run_command(std::string(test::system_python()) + " " +
                        (test::source_dir() / "scripts/fashion-image-folders").string() + " " +
                        (f / (split + "-images-idx3-ubyte.gz")).string() + " " +
                        (f / (split + "-labels-idx1-ubyte.gz")).string() + " " + out.string() +
                        " --format " + format + " --count " + std::to_string(count) +
                        (idx_prefix.empty() ? "" : " --idx " + idx_prefix));
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

double final_val_accuracy(const fs::path& run) {
  return test::run_history(run).back()["val_accuracy"].get<double>();
}

TEST(ImageDataCli, APngFolderTrainsFashionCnnAsTheSameSamplesInIdxFilesDo) {
  const fs::path dir = test::scratch_dir("image-data-cli-png");
  write_folders(dir / "png", "train", kSamples, "png", (dir / "subset").string());
  json config =
      json::parse(test::read_text(test::source_dir() / "resources/configs/fashion-cnn.json"));
  config["epochs"] = 1;
  config["data"]["train"] = {{"type", "idx"},
                             {"x", (dir / "subset-images.gz").string()},
                             {"y", (dir / "subset-labels.gz").string()}};
  auto r = test::train_in(dir, "idx", config);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The folder gives (28, 28, 1) images; fashion-cnn's first layer reshapes (28, 28).
  config["model"]["config"]["layers"][0]["config"]["batch_input_shape"] = {nullptr, 28, 28, 1};
  config["data"]["train"] = {{"type", "images"},
                             {"path", (dir / "png").string()},
                             {"image_size", {28, 28}},
                             {"color_mode", "grayscale"}};
  // The same validation samples as PNG files too.
  write_folders(dir / "png-test", "t10k", 10000, "png");
  config["data"]["validation"] = {{"type", "images"},
                                  {"path", (dir / "png-test").string()},
                                  {"image_size", {28, 28}},
                                  {"color_mode", "grayscale"}};
  r = test::train_in(dir, "folder", config);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double idx = final_val_accuracy(dir / "idx"), folder = final_val_accuracy(dir / "folder");
  EXPECT_GT(idx, 0.75);  // one epoch of 12,000 samples: about 0.79
  // One epoch of 12,000 samples in another order: a point and a half apart at most.
  EXPECT_NEAR(folder, idx, 0.015) << "IDX " << idx << ", PNG folder " << folder;
}

TEST(ImageDataCli, TheExampleConfigTrainsOnJpegFoldersWithAugmentation) {
  const fs::path dir = test::scratch_dir("image-data-cli-jpeg");
  write_folders(dir / "data/fashion-jpeg/train", "train", 3000, "jpeg");
  write_folders(dir / "data/fashion-jpeg/test", "t10k", 1000, "jpeg");
  // The example's relative paths resolve against the config's folder: copy it next to the data.
  fs::copy_file(test::source_dir() / "resources/configs/fashion-photos.json",
                dir / "fashion-photos.json");
  const auto r =
      test::run_command(test::tandem_cli() + " train " + (dir / "fashion-photos.json").string() +
                        " --run-dir " + (dir / "run").string() + " --set epochs=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(final_val_accuracy(dir / "run"), 0.6);
  const auto inspect =
      test::run_command(test::tandem_cli() + " inspect " + (dir / "run/model.h5").string());
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("classes: 10 (0-t-shirt, 1-trouser, 2-pullover"), std::string::npos)
      << inspect.out;
  // Every epoch says how long training waited for data, and that no file was skipped.
  const std::string events = test::read_text(dir / "run/events.jsonl");
  EXPECT_NE(events.find("\"data_wait_seconds\""), std::string::npos);
  EXPECT_NE(events.find("\"skipped_files\":0"), std::string::npos);
}

// tandem data bench times the pipeline and the step; CutMix trains on one-hot folder labels and
// refuses class indices with the way out.
TEST(ImageDataCli, DataBenchTimesBothSidesAndCutMixTrainsOnOneHotLabels) {
  const fs::path dir = test::scratch_dir("image-data-cli-bench");
  write_folders(dir / "data/fashion-jpeg/train", "train", 1000, "jpeg");
  write_folders(dir / "data/fashion-jpeg/test", "t10k", 500, "jpeg");
  json config =
      json::parse(test::read_text(test::source_dir() / "resources/configs/fashion-photos.json"));
  config["epochs"] = 2;
  test::write_text(dir / "photos.json", config.dump());
  auto r = test::run_command(test::tandem_cli() + " data bench " + (dir / "photos.json").string() +
                             " --seconds 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json bench = json::parse(r.out);
  EXPECT_GT(bench["pipeline_samples_per_sec"].get<double>(), 0) << bench;
  EXPECT_GT(bench["step_samples_per_sec"].get<double>(), 0) << bench;
  EXPECT_GT(bench["steps"].get<std::int64_t>(), 0) << bench;
  EXPECT_TRUE(bench["bound_by"] == "input pipeline" || bench["bound_by"] == "training step");

  config["data"]["cutmix"] = {{"alpha", 1.0}};
  test::write_text(dir / "indices.json", config.dump());
  r = test::run_command(test::tandem_cli() + " check " + (dir / "indices.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("data.cutmix"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\"label_mode\": \"categorical\""), std::string::npos) << r.err;

  for (const char* split : {"train", "validation"})
    config["data"][split]["label_mode"] = "categorical";
  config["loss"] = {{"class_name", "CategoricalCrossentropy"}, {"config", {{"from_logits", true}}}};
  test::write_text(dir / "cutmix.json", config.dump());
  r = test::run_command(test::tandem_cli() + " train " + (dir / "cutmix.json").string() +
                        " --run-dir " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(final_val_accuracy(dir / "run"), 0.4);
  EXPECT_EQ(json::parse(test::read_text(dir / "run/config.json"))["data"]["cutmix"]["alpha"], 1.0);
}

// tandem predict on an image folder names each row's file (CSV: its first field; JSON Lines:
// "path"), in the order the (shuffled) folder is read. The model's output is the image's mean
// pixel (global average pooling into a frozen Dense of kernel 1, bias 0), so PIL's mean of the
// file each row names is an independent check that the row belongs to that file.
TEST(ImageDataCli, PredictionsOfAnImageFolderNameTheFileOfEachRow) {
  const fs::path dir = test::scratch_dir("image-data-cli-predict-files");
  write_folders(dir / "photos", "t10k", 40, "png");
  fs::rename(dir / "photos" / "0-t-shirt", dir / "photos" / "0,t-shirt \"top\"");  // CSV quoting
  const json folder = {{"type", "images"},
                       {"path", (dir / "photos").string()},
                       {"image_size", {28, 28}},
                       {"color_mode", "grayscale"}};
  const json config = {{"epochs", 1},
                       {"batch_size", 16},
                       {"verbose", 0},
                       {"model",
                        {{"class_name", "Sequential"},
                         {"config",
                          {{"layers",
                            {{{"class_name", "InputLayer"},
                              {"config", {{"batch_input_shape", {nullptr, 28, 28, 1}}}}},
                             {{"class_name", "GlobalAveragePooling2D"}, {"config", json::object()}},
                             {{"class_name", "Dense"},
                              {"config",
                               {{"units", 1},
                                {"trainable", false},
                                {"kernel_initializer",
                                 {{"class_name", "Ones"}, {"config", json::object()}}}}}}}}}}}},
                       {"optimizer", "sgd"},
                       {"loss", "mse"},
                       {"data", {{"train", folder}, {"validation", folder}}}};
  auto r = test::train_in(dir, "run", config);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string predict = test::tandem_cli() + " predict " + (dir / "run.json").string() +
                              " --weights " + (dir / "run" / "model.h5").string() + " -o ";
  for (const char* name : {"p.csv", "p.jsonl", "p.npy"}) {
    r = test::run_command(predict + (dir / name).string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // .npy holds values alone: the run says where the files are.
  EXPECT_NE(r.err.find("--format csv or jsonl writes each row's file"), std::string::npos) << r.err;
  const auto check = test::run_python(dir / "check.py", R"(
import csv, json, sys, numpy as np
from PIL import Image
d = sys.argv[1]
rows = list(csv.reader(open(d + "/p.csv", newline="")))
lines = [json.loads(l) for l in open(d + "/p.jsonl")]
values = np.load(d + "/p.npy")
assert len(rows) == len(lines) == len(values) == 40, (len(rows), len(lines), values.shape)
assert sorted(r[0] for r in rows) != [r[0] for r in rows], "rows in sorted order: not shuffled?"
assert len(set(r[0] for r in rows)) == 40
quoted = [r[0] for r in rows if '"top"' in r[0]]
assert quoted and all(",t-shirt" in q for q in quoted), quoted
worst = 0.0
for row, line, value in zip(rows, lines, values):
    assert line["path"] == row[0], (line, row)
    mean = np.asarray(Image.open(row[0]).convert("L"), dtype=np.float64).mean() / 255
    for got in (float(row[1]), line["outputs"][0], float(value[0])):
        worst = max(worst, abs(got - mean))
assert worst < 1e-5, worst
print("ok", worst)
)",
                                      dir.string());
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace TANDEM_TEST_FILE {

// A validation folder without one of the training classes' sub-folders: its labels would shift
// (zebra taking dog's index) and were used so, silently. Refused before the run folder exists.
TEST(ImageDataCli, ValidationClassesMustBeTheTrainingClasses) {
  const fs::path dir = test::scratch_dir("image-data-cli-classes");
  const auto r = test::run_command(
      "cd " + dir.string() + " && " + test::system_python() +
      " -c 'import os, numpy as np\nfrom PIL import Image\n"
      "for split, classes in [(\"train\", [\"cat\", \"dog\", \"zebra\"]), (\"val\", [\"cat\", \"zebra\"])]:\n"
      "  for c in classes:\n"
      "    os.makedirs(split + \"/\" + c)\n"
      "    Image.fromarray(np.zeros((4, 4), np.uint8), \"L\").save(split + \"/\" + c + \"/0.png\")'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json config = test::tiny_regression_config();
  const auto folder = [&](const std::string& split) {
    return json{{"type", "images"},
                {"path", (dir / split).string()},
                {"image_size", {4, 4}},
                {"color_mode", "grayscale"}};
  };
  config["data"] = {{"train", folder("train")}, {"validation", folder("val")}};
  config["model"] = json::parse(R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "Flatten", "config": {"batch_input_shape": [null, 4, 4, 1]}},
      {"class_name": "Dense", "config": {"units": 3}}]}})");
  config["loss"] = {{"class_name", "SparseCategoricalCrossentropy"},
                    {"config", {{"from_logits", true}}}};
  auto t = test::train_in(dir, "run", config);
  EXPECT_EQ(t.exit_code, 2) << t.err;
  EXPECT_NE(t.err.find("'data.validation': its classes [cat, zebra] are not the training data's "
                       "[cat, dog, zebra]"),
            std::string::npos)
      << t.err;
  EXPECT_FALSE(fs::exists(dir / "run"));
  // With the missing class as an empty folder, the indices agree and it trains.
  fs::create_directories(dir / "val" / "dog");
  t = test::train_in(dir, "run", config);
  EXPECT_EQ(t.exit_code, 0) << t.err;

  // A file that starts as a PNG but does not decode: training skips it (on_bad_file "skip"
  // replaces it by the next sample), but predict would give that sample's output in its row.
  const std::string png = test::read_text(dir / "train" / "dog" / "0.png");
  test::write_text(dir / "train" / "dog" / "1.png", png.substr(0, 40));
  config["data"] = {{"train", folder("train")}};
  config["data"]["train"]["on_bad_file"] = "skip";
  t = test::train_in(dir, "skipping", config);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const auto p = test::run_command(
      test::tandem_cli() + " predict " + (dir / "skipping.json").string() + " --weights " +
      (dir / "skipping" / "model.h5").string() + " --split train -o " + (dir / "p.csv").string());
  EXPECT_EQ(p.exit_code, 2) << p.err;
  EXPECT_NE(p.err.find("1 file of"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("the predictions would not follow the files"), std::string::npos) << p.err;
  EXPECT_FALSE(fs::exists(dir / "p.csv"));
}

}  // namespace
}  // namespace tandem
