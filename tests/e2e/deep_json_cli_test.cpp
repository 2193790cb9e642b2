// JSON nested far too deep, through the `tandem` binary (issue 23, item 1): a config file, a
// --set value and a checkpoint's stored model_config each exit 2 naming the place, where a config
// nested 60,000 levels deep used to crash `tandem check` with SIGSEGV.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using test::run_command;
namespace fs = std::filesystem;

std::string nested(int depth) {
  return std::string(static_cast<std::size_t>(depth), '[') +
         std::string(static_cast<std::size_t>(depth), ']');
}

TEST(DeepJsonCli, ConfigsSetValuesAndCheckpointsExitTwoInsteadOfCrashing) {
  const fs::path dir = test::scratch_dir("deep-json");
  const std::string cli = test::tandem_cli();
  test::write_text(dir / "deep.json", "{\"model\": " + nested(100000) + "}");
  auto config = run_command(cli + " check " + (dir / "deep.json").string());
  EXPECT_EQ(config.exit_code, 2) << config.err;
  EXPECT_NE(config.err.find("nested deeper than 512"), std::string::npos) << config.err;

  const nlohmann::json small = {
      {"model",
       {{"class_name", "Sequential"},
        {"config", {{"layers", {{{"class_name", "Dense"},
                                 {"config", {{"units", 2}, {"input_shape", {3}}}}}}}}}}},
      {"loss", "mse"},
      {"data", {{"train", {{"type", "synthetic"}, {"samples", 8}, {"x_shape", {3}},
                           {"task", "regression"}, {"y_shape", {2}}}}}}};
  test::write_text(dir / "small.json", small.dump());
  // 30,000 levels: one command-line argument holds at most 128 KiB.
  test::write_text(dir / "deep-value.txt", "loss=" + nested(30000));
  auto set = run_command(cli + " check " + (dir / "small.json").string() + " --set \"$(cat " +
                         (dir / "deep-value.txt").string() + ")\"");
  EXPECT_EQ(set.exit_code, 2) << set.err;
  EXPECT_NE(set.err.find("--set loss"), std::string::npos) << set.err;

  auto trained = test::train_in(dir, "run", small);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  auto crafted = run_command(std::string(test::system_python()) + " -c '\n"
                             "import h5py, sys\n"
                             "with h5py.File(sys.argv[1], \"a\") as f:\n"
                             "  f.attrs[\"model_config\"] = \"[\" * 100000 + \"]\" * 100000\n' " +
                             (dir / "run" / "model.h5").string());
  ASSERT_EQ(crafted.exit_code, 0) << crafted.err;
  for (const char* command : {" inspect ", " inspect --json "}) {
    auto inspect = run_command(cli + command + (dir / "run" / "model.h5").string());
    EXPECT_EQ(inspect.exit_code, 2) << command << inspect.out << inspect.err;
    EXPECT_NE(inspect.err.find("model_config"), std::string::npos) << inspect.err;
    EXPECT_NE(inspect.err.find("nested deeper than 512"), std::string::npos) << inspect.err;
  }
}

}  // namespace
}  // namespace tandem
