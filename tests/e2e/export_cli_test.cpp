// `tandem export` end to end (docs/export.md): fashion-mlp, fashion-cnn and fashion-resnet,
// trained one epoch on a slice of Fashion-MNIST (written to HDF5 here by h5py), exported, then
// checked by others' code: onnx.checker, the graph's names, dynamic batch and metadata read by
// the onnx package, and OpenCV's DNN module predicting 1,000 test images as `tandem predict`
// does (max abs difference <= 1e-4, the same top-1 classes). Then `tandem predict --format`,
// and the bad inputs of `tandem export`: each exits 2 naming the problem and writes nothing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

std::string cli() { return test::tandem_cli(); }
std::string python() { return test::system_python(); }

// dir/fashion.h5: the first 2,000 training and 1,000 test images (values / 255) and labels.
fs::path write_fashion_slice(const fs::path& dir) {
  const fs::path out = dir / "fashion.h5";
  const std::string script = python() + " -c '\n"
      "import gzip, sys, numpy as np, h5py\n"
      "d = \"" + test::fashion_mnist_dir().string() + "/\"\n"
      "def images(f, n): return np.frombuffer(gzip.open(d + f).read()[16:], np.uint8).reshape(-1, 28, 28)[:n].astype(np.float32) / 255\n"
      "def labels(f, n): return np.frombuffer(gzip.open(d + f).read()[8:], np.uint8)[:n].astype(np.float32)\n"
      "with h5py.File(sys.argv[1], \"w\") as h:\n"
      "  h[\"train_x\"] = images(\"train-images-idx3-ubyte.gz\", 2000)\n"
      "  h[\"train_y\"] = labels(\"train-labels-idx1-ubyte.gz\", 2000)\n"
      "  h[\"test_x\"] = images(\"t10k-images-idx3-ubyte.gz\", 1000)\n"
      "  h[\"test_y\"] = labels(\"t10k-labels-idx1-ubyte.gz\", 1000)\n' " + out.string();
  const auto r = run_command(script);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

std::string slice_data(const fs::path& h5) {
  const std::string p = h5.string();
  return " --set 'data.train={\"type\": \"hdf5\", \"path\": \"" + p +
         "\", \"x\": \"train_x\", \"y\": \"train_y\"}' --set 'data.validation={\"type\": \"hdf5\", "
         "\"path\": \"" + p + "\", \"x\": \"test_x\", \"y\": \"test_y\"}' --set epochs=1 -q";
}

// Checks model.onnx against the predictions of `tandem predict` (pred.npy) in OpenCV; prints
// a JSON object of what it found.
const char* kCheckScript = R"(
import json, sys, numpy as np, onnx, cv2, h5py
onnx_file, predictions, data = sys.argv[1:4]
model = onnx.load(onnx_file)
onnx.checker.check_model(model, full_check=True)
dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
x = h5py.File(data, "r")["test_x"][()]
net = cv2.dnn.readNetFromONNX(onnx_file)
net.setInput(x[:, :, :, None], model.graph.input[0].name)
got = net.forward(model.graph.output[0].name).reshape(len(x), -1)
ref = np.load(predictions)
print(json.dumps({
    "opset": model.opset_import[0].version,
    "inputs": [[v.name, dims(v)] for v in model.graph.input],
    "outputs": [[v.name, dims(v)] for v in model.graph.output],
    "metadata": {p.key: p.value for p in model.metadata_props},
    "max_abs_diff": float(np.abs(got - ref).max()),
    "top1_agree": float((got.argmax(1) == ref.argmax(1)).mean()),
    "rows": len(ref)}))
)";

// The Python packages the export checks read with (Debian's python3-onnx, python3-opencv,
// installed by scripts/setup); empty when present, else why not.
std::string missing_onnx_packages() {
  const auto r = run_command(python() + " -c 'import onnx, cv2, h5py'");
  return r.exit_code == 0 ? "" : "python3-onnx or python3-opencv is not installed (scripts/setup "
                                 "installs them): " + r.err;
}

TEST(ExportCli, FashionModelsPredictInOpenCvAsInTandem) {
  if (const std::string why = missing_onnx_packages(); !why.empty()) GTEST_SKIP() << why;
  const fs::path dir = test::scratch_dir("cli-export-fashion");
  const fs::path h5 = write_fashion_slice(dir);
  test::write_text(dir / "check.py", kCheckScript);
  const std::string names = "T-shirt,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Boot";
  for (const char* name : {"fashion-mlp", "fashion-cnn", "fashion-resnet"}) {
    SCOPED_TRACE(name);
    const fs::path run = dir / name;
    const std::string config = (test::source_dir() / "resources/configs" / name).string() + ".json";
    auto r = run_command(cli() + " train " + config + slice_data(h5) + " --run-dir " + run.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const fs::path model = run / "model.h5", onnx = run / "model.onnx";
    r = run_command(cli() + " export " + model.string() + " --class-names " + names);
    ASSERT_EQ(r.exit_code, 0) << r.err;  // default output: next to the checkpoint
    EXPECT_NE(r.err.find("-> " + onnx.string()), std::string::npos) << r.err;
    r = run_command(cli() + " predict --weights " + model.string() + " -o " +
                    (run / "pred.npy").string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_command(python() + " " + (dir / "check.py").string() + " " + onnx.string() + " " +
                    (run / "pred.npy").string() + " " + h5.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json found = json::parse(r.out);
    EXPECT_EQ(found["opset"], 13);
    // The InputLayer's name (fashion-resnet's "image"; a Sequential model's input: "input").
    EXPECT_EQ(found["inputs"][0][0], std::string(name) == "fashion-resnet" ? "image" : "input");
    EXPECT_EQ(found["inputs"][0][1], json::parse(R"(["batch", 28, 28])")) << found;
    EXPECT_EQ(found["outputs"][0][0], "logits") << found;
    EXPECT_EQ(found["outputs"][0][1], json::parse(R"(["batch", 10])")) << found;
    EXPECT_EQ(found["metadata"]["class_names"],
              R"(["T-shirt","Trouser","Pullover","Dress","Coat","Sandal","Shirt","Sneaker","Bag","Boot"])");
    EXPECT_EQ(found["metadata"]["tandem_epoch"], "1");
    EXPECT_EQ(found["rows"], 1000);
    EXPECT_LE(found["max_abs_diff"].get<double>(), 1e-4);
    EXPECT_EQ(found["top1_agree"].get<double>(), 1.0);
  }
}

TEST(ExportCli, PredictWritesCsvNpyAndJsonLines) {
  const fs::path dir = test::scratch_dir("cli-predict-formats");
  const json config = test::tiny_regression_config();
  auto r = test::train_in(dir, "tiny", config);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string weights = (dir / "tiny" / "model.h5").string();
  const std::string base = cli() + " predict --weights " + weights + " --split train";
  r = run_command(base + " -o " + (dir / "p.npy").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command(base + " -o " + (dir / "p.jsonl").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto jsonl = run_command(base + " --format jsonl");  // to stdout
  ASSERT_EQ(jsonl.exit_code, 0) << jsonl.err;
  EXPECT_EQ(jsonl.out, test::read_text(dir / "p.jsonl"));
  const auto csv = run_command(base);
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  test::write_text(dir / "stdout.csv", csv.out);
  // NumPy reads all three to the same values.
  r = run_command(python() + " -c '\n"
                  "import json, sys, numpy as np\n"
                  "a = np.load(sys.argv[1])\n"
                  "b = np.array([json.loads(l) for l in open(sys.argv[2])], np.float32)\n"
                  "c = np.loadtxt(sys.argv[3], delimiter=\",\", dtype=np.float32)\n"
                  "assert a.shape == (16, 3) and b.shape == a.shape and c.shape == a.shape\n"
                  "assert (a == b).all() and (a == c).all()\n"
                  "print(\"same\")' " + (dir / "p.npy").string() + " " +
                  (dir / "p.jsonl").string() + " " + (dir / "stdout.csv").string());
  EXPECT_EQ(r.out, "same\n") << r.err;
  for (const char* bad : {" --format xml", " -o p.txt"}) {
    r = run_command(base + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find(std::string(bad).find("format") != std::string::npos ? "'--format'"
                                                                               : "'--output'"),
              std::string::npos)
        << r.err;
  }
}

// A binary classifier (one sigmoid unit, Keras' label_mode "binary") takes two class names: its
// output is the second's probability (an image folder's two classes were refused as 2 names
// for 1 unit, blamed on a --class-names never given).
TEST(ExportCli, ABinaryClassifierTakesTwoClassNames) {
  if (const std::string why = missing_onnx_packages(); !why.empty()) GTEST_SKIP() << why;
  const fs::path dir = test::scratch_dir("cli-export-binary");
  json config = test::tiny_regression_config();
  config["model"]["config"]["layers"][1]["config"] = {{"units", 1}, {"activation", "sigmoid"}};
  config["data"]["train"]["y_shape"] = {1};
  ASSERT_EQ(test::train_in(dir, "tiny", config).exit_code, 0);
  const fs::path out = dir / "binary.onnx";
  auto r = run_command(cli() + " export " + (dir / "tiny" / "model.h5").string() + " -o " +
                       out.string() + " --class-names cat,dog");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command(python() +
                  " -c 'import onnx, sys; m = onnx.load(sys.argv[1]); "
                  "print({p.key: p.value for p in m.metadata_props}[\"class_names\"])' " +
                  out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[\"cat\",\"dog\"]\n");
  r = run_command(cli() + " export " + (dir / "tiny" / "model.h5").string() + " -o " +
                  out.string() + " --class-names cat,dog,bird");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("or two for a single sigmoid unit"), std::string::npos) << r.err;
}

// An output layer named like the input ("input") is the graph's "input_1": the [info] line says
// so, as the graph has it (it used to print the layer's name, which a client could not find).
TEST(ExportCli, AnOutputNamedLikeTheInputGetsAFreeNameAndTheLineSaysIt) {
  if (const std::string why = missing_onnx_packages(); !why.empty()) GTEST_SKIP() << why;
  const fs::path dir = test::scratch_dir("cli-export-names");
  json config = test::tiny_regression_config();
  config["model"]["config"]["layers"][1]["config"]["name"] = "input";
  ASSERT_EQ(test::train_in(dir, "tiny", config).exit_code, 0);
  const fs::path out = dir / "named.onnx";
  auto r = run_command(cli() + " export " + (dir / "tiny" / "model.h5").string() + " -o " +
                       out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("inputs input (None, 4); outputs input_1 (None, 3)"), std::string::npos)
      << r.err;
  r = run_command(python() +
                  " -c 'import onnx, sys; g = onnx.load(sys.argv[1]).graph; "
                  "print([i.name for i in g.input], [o.name for o in g.output])' " +
                  out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "['input'] ['input_1']\n");
}

TEST(ExportCli, BadInputsExitTwoAndWriteNothing) {
  const fs::path dir = test::scratch_dir("cli-export-bad");
  const json config = test::tiny_regression_config();
  ASSERT_EQ(test::train_in(dir, "tiny", config).exit_code, 0);
  const std::string model = (dir / "tiny" / "model.h5").string();
  const fs::path out = dir / "out.onnx";
  struct Bad {
    std::string args, message;
  };
  test::write_text(dir / "not.h5", "this is not HDF5\n");
  const std::vector<Bad> bad{
      {(dir / "not.h5").string() + " -o " + out.string(), "not.h5"},
      {model + " -o " + out.string() + " --class-names a,b",
       "2 class names for a model whose output is (None, 3)"},
      // A doubled comma is a slip (it read as two names, "a" and "b").
      {model + " -o " + out.string() + " --class-names a,,b", "name 2 of \"a,,b\" is empty"},
      {model + " -o " + out.string() + " --config " + (dir / "not.h5").string(), "not.h5"},
  };
  for (const Bad& b : bad) {
    const auto r = run_command(cli() + " export " + b.args);
    EXPECT_EQ(r.exit_code, 2) << b.args << "\n" << r.err;
    EXPECT_NE(r.err.find(b.message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << b.args;
  }
  // A weights-only file (no model_config, as Keras' save_weights writes) needs --config.
  auto r = run_command(python() + " -c '\n"
                       "import h5py, sys\n"
                       "with h5py.File(sys.argv[1], \"r\") as src, h5py.File(sys.argv[2], \"w\") as dst:\n"
                       "  for k, v in src[\"model_weights\"].attrs.items(): dst.attrs[k] = v\n"
                       "  for k in src[\"model_weights\"]: src.copy(src[\"model_weights\"][k], dst, k)\n' " +
                       model + " " + (dir / "weights.h5").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command(cli() + " export " + (dir / "weights.h5").string() + " -o " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--config RUN.json"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  r = run_command(cli() + " export " + (dir / "weights.h5").string() + " -o " + out.string() +
                  " --config " + (dir / "tiny.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out));
}

}  // namespace
}  // namespace tandem
