// A CSV table from the command line: two well-separated blobs labelled "cat" and "dog" (a string
// column, declared in the spec's categories) train a softmax classifier to near-perfect
// accuracy; the same table without the declaration is an error that shows it (exit 2).
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(CsvDataCli, ATableWithStringLabelsTrainsAndUndeclaredStringsAreAnError) {
  const fs::path dir = test::scratch_dir("csv-data-cli");
  test::write_text(dir / "make.py",
                   "import csv, random\n"
                   "random.seed(5)\n"
                   "with open('blobs.csv', 'w', newline='') as f:\n"
                   "    w = csv.writer(f)\n"
                   "    w.writerow(['height', 'width', 'animal'])\n"
                   "    for i in range(400):\n"
                   "        dog = i % 2\n"
                   "        w.writerow([random.gauss(3 * dog, 0.5), random.gauss(-2 * dog, 0.5),\n"
                   "                    'dog' if dog else 'cat'])\n");
  const auto made =
      test::run_command("cd " + dir.string() + " && " + test::system_python() + " make.py");
  ASSERT_EQ(made.exit_code, 0) << made.err;

  json config = test::tiny_regression_config();
  config["epochs"] = 10;
  config["batch_size"] = 32;
  config["model"]["config"]["layers"] = json::parse(R"([
      {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 2]}},
      {"class_name": "Dense", "config": {"units": 2, "activation": "softmax"}}])");
  config["optimizer"] = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.05}}}};
  config["loss"] = "sparse_categorical_crossentropy";
  config["metrics"] = {"accuracy"};
  config["data"]["train"] = {{"type", "csv"},
                             {"path", (dir / "blobs.csv").string()},
                             {"y", "animal"},
                             {"categories", {{"animal", {"cat", "dog"}}}}};
  const auto r = test::train_in(dir, "run", config);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json history = test::run_history(dir / "run");
  ASSERT_EQ(history.size(), 10u);
  EXPECT_GT(history.back()["accuracy"].get<double>(), 0.97) << history.back();

  config["data"]["train"].erase("categories");
  test::write_text(dir / "undeclared.json", config.dump());
  const auto bad =
      test::run_command(test::tandem_cli() + " check " + (dir / "undeclared.json").string());
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find(R"("categories": {"animal": ["cat", "dog"]})"), std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace tandem
