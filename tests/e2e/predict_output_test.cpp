// `tandem predict -o FILE` replaces FILE atomically (tandem/atomic_file.hpp): whole new
// predictions, or the old file untouched and no temporary file left behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using test::run_command;

std::string cli() {
  return test::tandem_cli();
}

TEST(PredictCli, ReplacesItsOutputWholeAndLeavesItOnFailure) {
  const fs::path dir = test::scratch_dir("cli-predict-atomic");
  const std::string synthetic =
      R"('{"type": "synthetic", "samples": 64, "x_shape": [28, 28], "task": "classes", "classes": 10, "seed": 1}')";
  auto r = run_command(cli() + " train --set data.train=" + synthetic + " --set data.validation=" +
                       synthetic + " --set epochs=1 --run-dir " + (dir / "run").string() + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string weights = (dir / "run" / "model.h5").string();

  const fs::path out = dir / "p.csv";
  test::write_text(out, "old predictions\n");
  r = run_command(cli() + " predict --weights " + weights + " -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = test::read_text(out);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 64) << text.substr(0, 200);
  EXPECT_EQ(text.find("old"), std::string::npos);

  // A write that fails on the way (the file size limit: EFBIG once its signal is ignored): exit
  // 1, the path named, nothing left behind, the old output whole.
  r = run_command("bash -c \"trap '' XFSZ; ulimit -f 1; " + cli() + " predict --weights " +
                  weights + " -o " + out.string() + "\"");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot write '" + out.string() + "'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::strerror(EFBIG)), std::string::npos) << r.err;
  // A target that is no file to replace (a folder): a usage error before anything is computed.
  fs::create_directory(dir / "taken.csv");
  r = run_command(cli() + " predict --weights " + weights + " -o " + (dir / "taken.csv").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find((dir / "taken.csv").string() + " is a folder, not a file"),
            std::string::npos)
      << r.err;
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"p.csv", "run", "taken.csv"}));
  EXPECT_EQ(test::read_text(out), text);

  // A folder that does not exist: a usage error before anything is computed; and the weights
  // file itself is never the output.
  r = run_command(cli() + " predict --weights " + weights + " -o " + (dir / "no" / "p.csv").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("the folder " + (dir / "no").string() + " of "), std::string::npos) << r.err;
  const std::string model = test::read_text(weights);
  r = run_command(cli() + " predict --weights " + weights + " -o " + weights);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(test::read_text(weights), model);
}

}  // namespace
}  // namespace tandem
