// resources/configs/tiny-bert.json, the BERT-style sentence-pair classifier (two inputs: token
// ids and segment ids), through the `tandem` binary on a small slice of its task: it builds with
// Keras' parameter count, and three replicas train it to the weights of one (docs/design.md
// contract 1: within float rounding) and to the same loss history.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

TEST(TinyBertCli, ThreeReplicasTrainItAsOneDoes) {
  const fs::path dir = test::scratch_dir("tiny-bert");
  const std::string config = (test::source_dir() / "resources/configs/tiny-bert.json").string();
  auto summary = run_command(test::tandem_cli() + " summary " + config);
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  // Embeddings 32·32 + 2·32 + 24·32; five layer norms of 64 (one of the sum, two per block);
  // per block attention 4·(32·32 + 32) and the feed-forward 32·64 + 64 + 64·32 + 32; the head
  // 33: 1,024 + 64 + 768 + 5·64 + 2·(4,224 + 4,192) + 33.
  EXPECT_NE(summary.out.find("Total params: 19,041"), std::string::npos) << summary.out;
  const std::string small =
      " --set data.train.samples=384 --set data.validation.samples=64 --set epochs=1 -q";
  for (const char* devices : {"cpu:1", "cpu:3"}) {
    auto r = run_command(test::tandem_cli() + " train " + config + small + " --devices " +
                         devices + " --run-dir " + (dir / devices).string());
    ASSERT_EQ(r.exit_code, 0) << devices << ": " << r.err;
  }
  const std::string check = std::string(test::system_python()) + " -c '\n"
      "import h5py, sys, numpy as np\n"
      "a, b = (h5py.File(p, \"r\")[\"model_weights\"] for p in sys.argv[1:3])\n"
      "worst = 0.0\n"
      "def visit(name, item):\n"
      "  global worst\n"
      "  if isinstance(item, h5py.Dataset):\n"
      "    x, y = item[()], b[name][()]\n"
      "    worst = max(worst, float(np.abs(x - y).max() / (1e-3 + np.abs(x).max())))\n"
      "a.visititems(visit)\n"
      "print(worst)\n' " +
      (dir / "cpu:1" / "model.h5").string() + " " + (dir / "cpu:3" / "model.h5").string();
  // The same losses, epoch by epoch (a replica's loss is its rows' sum: the sums add up).
  const json one = test::run_history(dir / "cpu:1")[0];
  const json three = test::run_history(dir / "cpu:3")[0];
  for (const char* key : {"loss", "val_loss"})
    EXPECT_NEAR(three[key].get<double>(), one[key].get<double>(), 1e-6 * one[key].get<double>())
        << key;
  auto compared = run_command(check);
  ASSERT_EQ(compared.exit_code, 0) << compared.err;
  EXPECT_LT(std::stod(compared.out), 1e-4) << "largest relative weight difference";
}

}  // namespace
}  // namespace tandem
