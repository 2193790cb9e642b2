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

}  // namespace
}  // namespace tandem
