// Models with a class at every position of their output, through the CLI: a token tagger
// (Embedding, a Bidirectional LSTM over every step, a TimeDistributed softmax Dense) and a small
// U-Net (convolutions down, up-sampling back, a skip Concatenate, a softmax at each pixel),
// trained with sparse_categorical_crossentropy on a class index per step or pixel, as Keras
// users write them. Each learns its task; NumPy, reading the predictions, computes the accuracy
// and MeanIoU Tandem logged for the same weights and data (so both are taken per position, as
// Keras takes them); cpu:2 and cpu:3 train to cpu:1's weights; a label that is no class is named
// by its sample and position; class_weight, which Keras refuses for such targets, is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// `tagger OUT`: tag-train.npz and tag-val.npz, 10 tokens from 1 to 9 per sequence; a token's
// tag counts its neighbours it exceeds (0, 1 or 2; outside the sequence counts as 0), so it
// needs the steps on both sides.
// `shapes OUT`: shapes-train.npz and shapes-val.npz, 16 x 16 noisy images of one bright
// rectangle; a pixel's class is 0 outside it, 1 inside, 2 on its edge.
// `scores PRED.npy DATA.npz CLASSES`: the accuracy and Keras' MeanIoU (the mean over classes
// that occur of intersection over union) of the predictions' argmax at every position.
constexpr const char* kScript = R"PY(
import json, sys, numpy as np

def tagger(out):
    rng = np.random.default_rng(7)
    for n, name in ((2000, "train"), (400, "val")):
        x = rng.integers(1, 10, size=(n, 10))
        left = np.pad(x, ((0, 0), (1, 0)))[:, :-1]
        right = np.pad(x, ((0, 0), (0, 1)))[:, 1:]
        tags = (x > left).astype(np.int64) + (x > right)
        np.savez(f"{out}/tag-{name}.npz", x=x.astype(np.float32), y=tags)

def shapes(out):
    rng = np.random.default_rng(8)
    for n, name in ((600, "train"), (100, "val")):
        x = rng.normal(0, 0.3, size=(n, 16, 16, 1)).astype(np.float32)
        y = np.zeros((n, 16, 16), np.int64)
        for i in range(n):
            h, w = rng.integers(4, 11, size=2)
            top, left = rng.integers(0, 17 - h), rng.integers(0, 17 - w)
            x[i, top:top + h, left:left + w, 0] += 1
            y[i, top:top + h, left:left + w] = 2
            y[i, top + 1:top + h - 1, left + 1:left + w - 1] = 1
        np.savez(f"{out}/shapes-{name}.npz", x=x, y=y)

def scores(pred, data, classes):
    p = np.load(pred).argmax(-1)
    y = np.load(data)["y"]
    assert p.shape == y.shape, (p.shape, y.shape)
    confusion = np.zeros((classes, classes))
    np.add.at(confusion, (y.ravel(), p.ravel()), 1)
    inter = np.diag(confusion)
    union = confusion.sum(0) + confusion.sum(1) - inter
    print(json.dumps({"accuracy": float((p == y).mean()),
                      "mean_iou": float((inter[union > 0] / union[union > 0]).mean())}))

if sys.argv[1] == "tagger":
    tagger(sys.argv[2])
elif sys.argv[1] == "shapes":
    shapes(sys.argv[2])
else:
    scores(sys.argv[2], sys.argv[3], int(sys.argv[4]))
)PY";

json npz(const fs::path& path) {
  return {{"type", "npz"}, {"path", path.string()}};
}

// A run config training `model` with sparse cross-entropy on OUT/<data>-train.npz, validated on
// OUT/<data>-val.npz.
json run_config(const fs::path& dir, const std::string& data, const json& model,
                const json& metrics, int epochs, int batch) {
  return {{"name", data},
          {"seed", 5},
          {"epochs", epochs},
          {"batch_size", batch},
          {"model", model},
          {"loss", "sparse_categorical_crossentropy"},
          {"metrics", metrics},
          {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
          {"data",
           {{"train", npz(dir / (data + "-train.npz"))},
            {"validation", npz(dir / (data + "-val.npz"))}}}};
}

class PerPositionCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("per-position");
    for (const char* what : {"tagger", "shapes"}) {
      auto r = test::run_python(dir_ / "data.py", kScript, std::string(what) + " " + dir_.string());
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
  }
  // Predicts the validation data with the weights of run folder `run` into <run>.npy.
  static void predict(const std::string& run) {
    auto r = run_command(test::tandem_cli() + " predict " + (dir_ / (run + ".json")).string() +
                         " --weights " + (dir_ / run / "model.h5").string() + " -o " +
                         (dir_ / (run + ".npy")).string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // `run` trained into <prefix>-<plan> for each plan (the same seed), each folder's weights
  // predicting the validation data into <folder>.npy.
  static void train_and_predict_on(const std::string& prefix, const json& run,
                                   std::initializer_list<const char*> plans) {
    for (const char* plan : plans) {
      auto r = test::train_in(dir_, prefix + "-" + plan, run, std::string("--devices ") + plan);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      predict(prefix + "-" + plan);
    }
  }
  // NumPy's accuracy and MeanIoU of <run>.npy against the validation targets of `data`.
  static json scores(const std::string& run, const std::string& data, int classes) {
    auto r =
        test::run_python(dir_ / "data.py", kScript,
                         "scores " + (dir_ / (run + ".npy")).string() + " " +
                             (dir_ / (data + "-val.npz")).string() + " " + std::to_string(classes));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json();
  }
  static inline fs::path dir_;
};

// Embedding -> Bidirectional(LSTM, every step) -> TimeDistributed(Dense softmax), as Keras 2
// tutorials write a tagger.
json tagger_model() {
  const json lstm = {{"class_name", "LSTM"},
                     {"config", {{"name", "lstm"}, {"units", 16}, {"return_sequences", true}}}};
  const json dense = {{"class_name", "Dense"},
                      {"config", {{"name", "dense"}, {"units", 3}, {"activation", "softmax"}}}};
  json layers = json::array();
  layers.push_back(
      {{"class_name", "InputLayer"},
       {"config", {{"batch_input_shape", {nullptr, 10}}, {"dtype", "int32"}, {"name", "tokens"}}}});
  layers.push_back({{"class_name", "Embedding"},
                    {"config", {{"name", "embedding"}, {"input_dim", 10}, {"output_dim", 8}}}});
  layers.push_back(
      {{"class_name", "Bidirectional"}, {"config", {{"name", "context"}, {"layer", lstm}}}});
  layers.push_back(
      {{"class_name", "TimeDistributed"}, {"config", {{"name", "tags"}, {"layer", dense}}}});
  return {{"class_name", "Sequential"},
          {"config", {{"name", "tagger"}, {"layers", layers}}},
          {"keras_version", "2.15.0"}};
}

TEST_F(PerPositionCli, ATokenTaggerLearnsItsTagsAndTrainsAlikeOnCpu3) {
  json run = run_config(dir_, "tag", tagger_model(), {"accuracy"}, 4, 32);
  // Not seed 5: its 252 Adam steps at a learning rate of 0.01 amplify any change of rounding
  // about ten times more than other seeds' (measured after 4 epochs, predictions' largest
  // difference over their largest value: cpu:2 against cpu:1 3.1e-5 where seeds 1-4 and 6-8
  // gave 1.4-3.4e-6; the LSTM cell's tanh and sigmoid by oneDNN instead of libm, on cpu:1 alone,
  // 3.5e-5), so a bound of 1e-5 there held or failed by the luck of the plan.
  run["seed"] = 1;
  ASSERT_NO_FATAL_FAILURE(train_and_predict_on("tagger", run, {"cpu:1", "cpu:2", "cpu:3"}));
  const json history = test::run_history(dir_ / "tagger-cpu:1");
  ASSERT_EQ(history.size(), 4u);
  const double logged = history.back()["val_accuracy"].get<double>();
  EXPECT_GE(logged, 0.95);  // measured 0.982; the commonest tag alone scores 0.38
  const json numpy = scores("tagger-cpu:1", "tag", 3);
  EXPECT_NEAR(numpy["accuracy"].get<double>(), logged, 1e-6);
  for (const char* plan : {"tagger-cpu:2.npy", "tagger-cpu:3.npy"})
    EXPECT_TRUE(test::npy_close(dir_ / plan, dir_ / "tagger-cpu:1.npy", 1e-5, dir_)) << plan;
  // The TimeDistributed's weights under Keras 2's names, as h5py reads them.
  auto names = test::run_python(
      dir_ / "names.py",
      "import h5py, sys\n"
      "g = h5py.File(sys.argv[1], 'r')['model_weights']['tags']\n"
      "names = [n.decode() for n in g.attrs['weight_names']]\n"
      "assert names == ['tags/kernel:0', 'tags/bias:0'], names\n"
      "assert g['tags/kernel:0'].shape == (32, 3), g['tags/kernel:0'].shape\n",
      (dir_ / "tagger-cpu:1" / "model.h5").string());
  EXPECT_EQ(names.exit_code, 0) << names.err;
}

TEST_F(PerPositionCli, ALabelThatIsNoClassIsNamedByItsSampleAndPosition) {
  auto r = test::run_python(dir_ / "bad.py",
                            "import numpy as np\n"
                            "d = dict(np.load('" +
                                (dir_ / "tag-val.npz").string() +
                                "'))\n"
                                "d['y'][3, 7] = 5\n"
                                "np.savez('" +
                                (dir_ / "tag-bad.npz").string() + "', **d)\n",
                            "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json run = run_config(dir_, "tag", tagger_model(), {"accuracy"}, 1, 32);
  run["data"]["train"] = npz(dir_ / "tag-bad.npz");
  auto t = test::train_in(dir_, "tagger-bad", run);
  EXPECT_NE(t.exit_code, 0);
  EXPECT_NE(t.err.find("sample 3 of"), std::string::npos) << t.err;
  EXPECT_NE(
      t.err.find(": label 5 at position 7 of 10 for output 'tags' is not a class index in [0, 3)"),
      std::string::npos)
      << t.err;

  run = run_config(dir_, "tag", tagger_model(), {"accuracy"}, 1, 32);
  run["class_weight"] = {{"0", 1.0}, {"2", 3.0}};
  auto w = test::train_in(dir_, "tagger-class-weight", run);
  EXPECT_EQ(w.exit_code, 2);
  EXPECT_NE(w.err.find("at 'class_weight': weighs a sample by its one class, but model 'tagger' "
                       "has a class at each of 10 positions (output (None, 10, 3))"),
            std::string::npos)
      << w.err;
}

// input (16, 16, 1) -> down (Conv2D 8, relu) -> pool -> middle (Conv2D 16, relu) -> up
// (UpSampling2D) -> skip [up, down] -> mix (Conv2D 8, relu) -> pixels (Conv2D 1x1, softmax):
// Keras 2's functional form.
json unet_model() {
  const auto conv = [](const char* name, int filters, int kernel, const char* activation,
                       const char* from) {
    return json{
        {"class_name", "Conv2D"},
        {"name", name},
        {"config",
         {{"name", name},
          {"filters", filters},
          {"kernel_size", {kernel, kernel}},
          {"padding", "same"},
          {"activation", activation}}},
        {"inbound_nodes", test::keras2_calls({{json::array({from, 0, 0, json::object()})}})}};
  };
  const auto layer = [](const char* cls, const char* name, json config, std::vector<json> from) {
    config["name"] = name;
    std::vector<json> refs;
    for (const json& f : from) refs.push_back(json::array({f, 0, 0, json::object()}));
    return json{{"class_name", cls},
                {"name", name},
                {"config", config},
                {"inbound_nodes", test::keras2_calls({refs})}};
  };
  json layers = json::array();
  layers.push_back({{"class_name", "InputLayer"},
                    {"name", "image"},
                    {"config", {{"batch_input_shape", {nullptr, 16, 16, 1}}, {"name", "image"}}},
                    {"inbound_nodes", json::array()}});
  layers.push_back(conv("down", 8, 3, "relu", "image"));
  layers.push_back(layer("MaxPooling2D", "pool", {{"pool_size", {2, 2}}}, {"down"}));
  layers.push_back(conv("middle", 16, 3, "relu", "pool"));
  layers.push_back(layer("UpSampling2D", "up", {{"size", {2, 2}}}, {"middle"}));
  layers.push_back(layer("Concatenate", "skip", {{"axis", -1}}, {"up", "down"}));
  layers.push_back(conv("mix", 8, 3, "relu", "skip"));
  layers.push_back(conv("pixels", 3, 1, "softmax", "mix"));
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "unet"},
            {"layers", layers},
            {"input_layers", {{"image", 0, 0}}},
            {"output_layers", {{"pixels", 0, 0}}}}},
          {"keras_version", "2.15.0"},
          {"backend", "tensorflow"}};
}

TEST_F(PerPositionCli, ASmallUNetSegmentsItsImagesAndNumPyAgreesOnItsMeanIou) {
  const json metrics = {
      "accuracy",
      {{"class_name", "MeanIoU"}, {"config", {{"num_classes", 3}, {"sparse_y_pred", false}}}}};
  const json run = run_config(dir_, "shapes", unet_model(), metrics, 6, 20);
  ASSERT_NO_FATAL_FAILURE(train_and_predict_on("unet", run, {"cpu:1", "cpu:3"}));
  const json history = test::run_history(dir_ / "unet-cpu:1");
  ASSERT_EQ(history.size(), 6u);
  const json& last = history.back();
  const json numpy = scores("unet-cpu:1", "shapes", 3);
  EXPECT_NEAR(numpy["accuracy"].get<double>(), last["val_accuracy"].get<double>(), 1e-6);
  EXPECT_NEAR(numpy["mean_iou"].get<double>(), last["val_mean_io_u"].get<double>(), 1e-5);
  // Measured 0.997 and 0.986; calling every pixel background scores 0.80 and 0.27.
  EXPECT_GE(last["val_accuracy"].get<double>(), 0.98);
  EXPECT_GE(last["val_mean_io_u"].get<double>(), 0.9);
  EXPECT_TRUE(test::npy_close(dir_ / "unet-cpu:3.npy", dir_ / "unet-cpu:1.npy", 1e-5, dir_));
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
