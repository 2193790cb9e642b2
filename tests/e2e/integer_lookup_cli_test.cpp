// IntegerLookup in a model trained by the `tandem` binary: user ids (large integers, a tenth of
// them never seen in the vocabulary) looked up into an Embedding, the class decided by the ids.
// The model learns it; cpu:3 trains to cpu:1's weights (contract 1); the checkpoint's
// model_config keeps the vocabulary, and `evaluate` from it gives the training run's figures.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

constexpr const char* kWriteData = R"PY(
import sys, h5py, numpy as np
rng = np.random.default_rng(4)
ids = np.arange(50000, 50040) * 7  # the vocabulary: 40 ids up to 350273
n = 600
x = rng.choice(ids, size=(n, 3))
unknown = rng.random((n, 3)) < 0.1
x[unknown] = rng.integers(1, 1000, size=unknown.sum())  # ids outside the vocabulary
good = set(ids[::2].tolist())  # an id of the even half is "good"
y = np.array([sum(v in good for v in row) >= 2 for row in x], dtype=np.int64)
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = x.astype(np.float32)
    f["y"] = y
print(",".join(str(v) for v in ids))
)PY";

json run_config(const fs::path& data, const json& vocabulary) {
  json model = json::parse(R"({"class_name": "Sequential", "config": {"name": "ids", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 3], "name": "x"}},
    {"class_name": "IntegerLookup", "config": {"name": "lookup"}},
    {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 41, "output_dim": 6}},
    {"class_name": "Flatten", "config": {"name": "flat"}},
    {"class_name": "Dense", "config": {"name": "hidden", "units": 16, "activation": "relu"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 2, "activation": "softmax"}}]}})");
  model["config"]["layers"][1]["config"]["vocabulary"] = vocabulary;
  return {
      {"name", "ids"},
      {"seed", 3},
      {"epochs", 12},
      {"batch_size", 32},
      {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.02}}}}},
      {"loss", "sparse_categorical_crossentropy"},
      {"metrics", {"accuracy"}},
      {"model", model},
      {"data", {{"train", {{"type", "hdf5"}, {"path", data.string()}, {"x", "x"}, {"y", "y"}}}}}};
}

TEST(IntegerLookupCli, LookedUpIdsTrainOnAnyReplicaCountAndTheCheckpointKeepsTheVocabulary) {
  const fs::path dir = test::scratch_dir("integer-lookup-cli");
  auto w = test::run_python(dir / "write.py", kWriteData, (dir / "data.h5").string());
  ASSERT_EQ(w.exit_code, 0) << w.err;
  json vocabulary = json::array();
  std::stringstream ids(w.out);
  for (std::string id; std::getline(ids, id, ',');) vocabulary.push_back(std::stoll(id));
  ASSERT_EQ(vocabulary.size(), 40u);
  const json config = run_config(dir / "data.h5", vocabulary);
  for (const auto& [name, extra] : {std::pair{"one", ""}, {"three", "--devices cpu:3"}}) {
    auto r = test::train_in(dir, name, config, extra);
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
  }
  const json history = test::run_history(dir / "one");
  ASSERT_FALSE(history.empty());
  EXPECT_GT(history.back()["accuracy"].get<double>(), 0.9) << history.back().dump();
  auto same = run_command(
      std::string(test::system_python()) +
      " -c '\n"
      "import h5py, sys, numpy as np\n"
      "a, b = (h5py.File(p, \"r\")[\"model_weights\"] for p in sys.argv[1:3])\n"
      "for layer, w in ((\"emb\", \"embeddings:0\"), (\"out\", \"kernel:0\")):\n"
      "  x, y = a[layer][layer][w][()], b[layer][layer][w][()]\n"
      "  if not np.allclose(x, y, rtol=1e-5, atol=1e-5): sys.exit(1)\n"
      "m = h5py.File(sys.argv[1], \"r\").attrs[\"model_config\"]\n"
      "print(m if isinstance(m, str) else m.decode())\n' " +
      (dir / "one" / "model.h5").string() + " " + (dir / "three" / "model.h5").string());
  ASSERT_EQ(same.exit_code, 0) << same.out << same.err;
  const json saved = json::parse(same.out);
  EXPECT_EQ(saved["config"]["layers"][1]["class_name"], "IntegerLookup");
  EXPECT_EQ(saved["config"]["layers"][1]["config"]["vocabulary"], vocabulary);

  json evaluated = config;
  evaluated["data"]["test"] = config["data"]["train"];
  std::ofstream(dir / "evaluate.json") << evaluated.dump(2);
  auto ev = run_command(test::tandem_cli() + " evaluate " + (dir / "evaluate.json").string() +
                        " --weights " + (dir / "one" / "model.h5").string() + " --split test -q");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  EXPECT_GT(json::parse(ev.out)["accuracy"].get<double>(), 0.9) << ev.out;
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
