// NumPy data from the command line: a .npz written by NumPy trains a model to the fit NumPy's
// least squares finds, and a bad archive is a clear error (exit 2) from check and train alike.
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(NumpyDataCli, AnNpzFromNumPyTrainsAndABadOneIsAnErrorNamingIt) {
  const fs::path dir = test::scratch_dir("numpy-data-cli");
  // y = x W + b exactly: Adam reaches a loss near 0 where NumPy's lstsq residual is 0.
  test::write_text(dir / "make.py",
                   "import numpy as np\n"
                   "rng = np.random.default_rng(3)\n"
                   "x = rng.standard_normal((256, 4)).astype(np.float32)\n"
                   "w = rng.standard_normal((4, 3)).astype(np.float32)\n"
                   "np.savez_compressed('linear.npz', x=x, y=x @ w + 0.5)\n"
                   "open('broken.npz', 'wb').write(open('linear.npz', 'rb').read()[:300])\n");
  const auto made =
      test::run_command("cd " + dir.string() + " && " + test::system_python() + " make.py");
  ASSERT_EQ(made.exit_code, 0) << made.err;

  json config = test::tiny_regression_config();
  config["epochs"] = 60;
  config["batch_size"] = 32;
  config["optimizer"] = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.05}}}};
  config["data"]["train"] = {{"type", "npz"}, {"path", (dir / "linear.npz").string()}};
  const auto r = test::train_in(dir, "run", config);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json history = test::run_history(dir / "run");
  ASSERT_EQ(history.size(), 60u);
  EXPECT_LT(history.back()["loss"].get<double>(), 1e-3) << history.back();
  EXPECT_LT(history.back()["loss"].get<double>(), history.front()["loss"].get<double>() / 100);

  config["data"]["train"]["path"] = (dir / "broken.npz").string();
  test::write_text(dir / "broken.json", config.dump());
  for (const std::string command : {"check", "train -q"}) {
    const auto bad = test::run_command(test::tandem_cli() + " " + command + " " +
                                       (dir / "broken.json").string());
    EXPECT_EQ(bad.exit_code, 2) << command << ": " << bad.err;
    EXPECT_NE(bad.err.find("broken.npz"), std::string::npos) << bad.err;
  }
}

// New data comes without targets: x alone (an .npy file, an .npz or HDF5 file with "y": null, a
// CSV without "y" columns) is predicted, row for row what the same x gives with targets; training
// on it or evaluating it is an error saying why.
TEST(NumpyDataCli, DataWithoutTargetsIsPredictedAndRefusedForTrainingAndEvaluation) {
  const fs::path dir = test::scratch_dir("numpy-data-cli-unlabeled");
  const auto made = test::run_python(
      dir / "make.py",
      "import os, sys, h5py, numpy as np\n"
      "os.chdir(sys.argv[1])\n"
      "x = np.random.default_rng(5).standard_normal((16, 4)).astype(np.float32)\n"
      "np.save('x.npy', x)\n"
      "np.save('y.npy', np.random.default_rng(6).standard_normal((16, 3)).astype(np.float32))\n"
      "np.savez('x.npz', x=x)\n"
      "with h5py.File('x.h5', 'w') as f: f['x'] = x\n"
      "open('x.csv', 'w').write('a,b,c,d\\n' + ''.join(','.join('%.9g' % v for v in r) + "
      "'\\n' for r in x))\n",
      dir.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  json config = test::tiny_regression_config();
  config["data"]["train"] = {
      {"type", "npy"}, {"x", (dir / "x.npy").string()}, {"y", (dir / "y.npy").string()}};
  ASSERT_EQ(test::train_in(dir, "run", config).exit_code, 0);
  const std::string weights = (dir / "run" / "model.h5").string();
  const auto predict = [&](const json& spec, const std::string& out) {
    json c = config;
    c["data"]["test"] = spec;
    test::write_text(dir / (out + ".json"), c.dump());
    return test::run_command(test::tandem_cli() + " predict " + (dir / (out + ".json")).string() +
                             " --weights " + weights + " --split test -o " +
                             (dir / (out + ".csv")).string());
  };
  auto r = predict(config["data"]["train"], "labeled");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected = test::read_text(dir / "labeled.csv");
  for (const auto& [name, spec] : std::vector<std::pair<std::string, json>>{
           {"npy", {{"type", "npy"}, {"x", (dir / "x.npy").string()}}},
           {"npz", {{"type", "npz"}, {"path", (dir / "x.npz").string()}, {"y", nullptr}}},
           {"csv", {{"type", "csv"}, {"path", (dir / "x.csv").string()}}},
           {"hdf5", {{"type", "hdf5"}, {"path", (dir / "x.h5").string()}, {"y", nullptr}}}}) {
    r = predict(spec, name);
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_EQ(test::read_text(dir / (name + ".csv")), expected) << name;
  }
  // An output over the data being predicted is refused, the data kept (it was replaced).
  json over = config;
  over["data"]["test"] = {{"type", "npy"}, {"x", "x.npy"}};
  test::write_text(dir / "over.json", over.dump());
  const std::string x_before = test::read_text(dir / "x.npy");
  r = test::run_command("cd " + dir.string() + " && " + test::tandem_cli() +
                        " predict over.json --weights " + weights + " --split test -o ./x.npy");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("./x.npy is the input file " + (dir / "x.npy").string()), std::string::npos)
      << r.err;
  EXPECT_EQ(test::read_text(dir / "x.npy"), x_before);
  // Evaluating or training on it says what is missing.
  json c = config;
  c["data"]["test"] = {{"type", "npy"}, {"x", (dir / "x.npy").string()}};
  test::write_text(dir / "eval.json", c.dump());
  r = test::run_command(test::tandem_cli() + " evaluate " + (dir / "eval.json").string() +
                        " --weights " + weights + " --split test");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("the evaluation data has no targets (no \"y\")"), std::string::npos)
      << r.err;
  c["data"]["train"] = c["data"]["test"];
  r = test::train_in(dir, "unlabeled", c);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("the training data has no targets"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "unlabeled"));
}

}  // namespace
}  // namespace tandem
