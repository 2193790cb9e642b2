// Keras 3 changed a few definitions: hard_sigmoid (Keras 2: clip(0.2x + 0.5, 0, 1); Keras 3:
// relu6(x + 3) / 6) and MultiHeadAttention's query rows whose keys are all masked. A model of a
// Keras 2 file or config ("keras_version": "2.x") computes what tf.keras computed; it used to get
// Keras 3's hard_sigmoid silently (up to 0.08 off). The files are Tandem checkpoints whose root
// keras_version and weights h5py sets, as a Keras 2.15 save_model file has them.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// Identity kernel, zero bias, the root's keras_version set to argv[2].
constexpr const char* kAsKeras = R"PY(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    f.attrs["keras_version"] = sys.argv[2]
    f["model_weights/dense/dense/kernel:0"][...] = np.eye(4, dtype=np.float32)
    f["model_weights/dense/dense/bias:0"][...] = np.zeros(4, np.float32)
)PY";

std::vector<float> csv_values(const std::string& text) {
  std::vector<float> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) out.push_back(std::stof(cell));
  }
  return out;
}

TEST(KerasGenerationCli, AKeras2FilesHardSigmoidIsKeras2s) {
  const fs::path dir = test::scratch_dir("keras-generation");
  auto r = run_command(std::string(test::system_python()) + " -c 'import numpy as np; np.save(\"" +
                       (dir / "x.npy").string() +
                       "\", np.array([[-2, -1, 1, 2], [0, 0.5, 1.5, 2.4]], np.float32))'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json config = test::tiny_regression_config();
  config["model"]["config"]["layers"][1] = {
      {"class_name", "Dense"},
      {"config", {{"name", "dense"}, {"units", 4}, {"activation", "hard_sigmoid"}}}};
  config["data"]["train"]["y_shape"] = {4};
  ASSERT_EQ(test::train_in(dir, "run", config).exit_code, 0);
  test::write_text(dir / "as_keras.py", kAsKeras);
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"2.15.0", {0.1f, 0.3f, 0.7f, 0.9f, 0.5f, 0.6f, 0.8f, 0.98f}},  // clip(0.2x + 0.5)
      {"3.0.0",
       {1 / 6.f, 2 / 6.f, 4 / 6.f, 5 / 6.f, 0.5f, 3.5f / 6, 4.5f / 6, 5.4f / 6}}};  // relu6(x+3)/6
  for (const auto& [version, expected] : cases) {
    const fs::path file = dir / ("keras-" + version + ".h5");
    fs::copy_file(dir / "run" / "model.h5", file, fs::copy_options::overwrite_existing);
    r = run_command(std::string(test::system_python()) + " " + (dir / "as_keras.py").string() +
                    " " + file.string() + " " + version);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const fs::path run = dir / ("run-" + version + ".json");
    r = run_command(test::tandem_cli() + " import " + file.string() + " -o " + run.string() +
                    " --set data.train.type=npy --set data.train.x=" + (dir / "x.npy").string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(test::read_text(run))["model"]["keras_version"], version);
    const fs::path out = dir / ("out-" + version + ".csv");
    r = run_command(test::tandem_cli() + " predict " + run.string() + " --weights " +
                    file.string() + " --split train -o " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<float> got = csv_values(test::read_text(out));
    ASSERT_EQ(got.size(), expected.size()) << version;
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], expected[i], 1e-6) << version << " at " << i;
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
