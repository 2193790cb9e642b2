// Issue 23, item 1 (the rest): outside training, the first SIGINT ends a command at once with
// exit 130 (it used to raise a flag nobody read: an evaluation ran to its end); and a truncated
// plugin .so is an error naming the file, where dlopen used to die of SIGBUS (taking `tandem
// check` and `tandem plugins` with it).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using test::run_command;
namespace fs = std::filesystem;

// Whether process `pid`'s main thread blocks SIGINT (/proc/PID/status, SigBlk: a hex mask).
bool blocks_sigint(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("SigBlk:", 0) == 0)
      return (std::stoull(line.substr(7), nullptr, 16) >> (SIGINT - 1)) & 1;
  return false;
}

TEST(InterruptsCli, TheFirstSigintEndsAnEvaluationWithExit130) {
  const fs::path dir = test::scratch_dir("interrupt-evaluate");
  ASSERT_EQ(test::train_in(dir, "tiny", test::tiny_regression_config()).exit_code, 0);
  // An evaluation of 2^30 samples: minutes of work.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string weights = (dir / "tiny" / "model.h5").string();
    ::execl(test::tandem_cli().c_str(), "tandem", "evaluate", "--weights", weights.c_str(),
            "--split", "train", "--set", "data.train.samples=1073741824", "-q", (char*)nullptr);
    std::_Exit(127);
  }
  // Until its signal thread runs (the main thread then blocks SIGINT), and a moment more.
  for (int i = 0; i < 200 && !blocks_sigint(pid); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(blocks_sigint(pid));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  for (int i = 0; i < 100 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  if (::waitpid(pid, &status, WNOHANG) == 0 && seconds >= 5) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the evaluation went on after SIGINT";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_LT(seconds, 5.0);
}

TEST(PluginFilesCli, ATruncatedPluginIsAnErrorNotASigbus) {
  const fs::path dir = test::scratch_dir("truncated-plugin");
  const fs::path whole = fs::path(TANDEM_BINARY_DIR) / "plugins" / "tandem-csv_logger.so";
  ASSERT_TRUE(fs::exists(whole));
  fs::create_directories(dir / "plugins");
  const fs::path cut = dir / "plugins" / "tandem-cut.so";
  fs::copy_file(whole, cut);
  fs::resize_file(cut, fs::file_size(whole) / 2);
  json config = test::tiny_regression_config();
  config["plugin_paths"] = {"plugins"};
  config["callbacks"] = {{{"plugin", "cut"}}};
  test::write_text(dir / "run.json", config.dump());
  auto r = run_command(test::tandem_cli() + " check " + (dir / "run.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(cut.string() + ": truncated"), std::string::npos) << r.err;
  // The listing names the broken file and still lists the others.
  r = run_command("TANDEM_PLUGIN_PATH=" + (dir / "plugins").string() + " " + test::tandem_cli() +
                  " plugins --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("csv_logger"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("truncated"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tandem
