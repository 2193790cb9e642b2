// End-to-end runs of `tandem devices`: table, --json, and --watch as the GUI uses it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

extern char** environ;

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// Runs `tandem <args>` with stdout going to `out_path`, interrupts it with SIGINT after
// `run_for`, and returns its exit status (as waitpid reports it).
int run_then_interrupt(std::vector<std::string> args, const fs::path& out_path,
                       std::chrono::milliseconds run_for) {
  args.insert(args.begin(), test::tandem_cli());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(rc, 0);
  if (rc != 0) return -1;
  std::this_thread::sleep_for(run_for);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(DevicesCli, PrintsATableWithTheCpuFirst) {
  auto r = test::run_command(test::tandem_cli() + " devices");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = lines_of(r.out);
  ASSERT_GE(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0].rfind("device", 0), 0u) << r.out;
  EXPECT_EQ(lines[1].rfind("cpu ", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "no ANSI codes when not a terminal";
}

TEST(DevicesCli, JsonIsOneObjectWithTheDocumentedKeys) {
  auto r = test::run_command(test::tandem_cli() + " devices --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  for (const char* key : {"cpu", "gpus", "cuda", "sample"}) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_GT(j["cpu"]["logical_cores"].get<int>(), 0);
  EXPECT_GT(j["cpu"]["memory_bytes"].get<std::int64_t>(), 0);
  EXPECT_TRUE(j["cuda"]["status"].is_string());
  if (j["gpus"].empty()) {
    EXPECT_FALSE(j["cuda"]["status"].get<std::string>().empty());
  }
  EXPECT_TRUE(j["sample"]["cpu"]["utilization_percent"].is_number()) << j.dump();
  EXPECT_EQ(lines_of(r.out).size(), 1u);
}

TEST(DevicesCli, WatchJsonWritesOneObjectPerLineUntilSigint) {
  const fs::path out = test::scratch_dir("devices-watch") / "out.jsonl";
  int status =
      run_then_interrupt({"devices", "--watch", "--json"}, out, std::chrono::milliseconds(2500));
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto lines = lines_of(test::read_text(out));
  ASSERT_GE(lines.size(), 2u);
  std::string previous_time;
  for (const auto& line : lines) {
    json j = json::parse(line);  // throws if malformed
    ASSERT_TRUE(j.contains("sample")) << line;
    EXPECT_TRUE(j.contains("cpu") && j.contains("gpus") && j.contains("cuda")) << line;
    EXPECT_NE(j["sample"]["time"].get<std::string>(), previous_time);
    previous_time = j["sample"]["time"];
  }
}

TEST(DevicesCli, WatchTablesFollowOneAnotherWhenNotATerminal) {
  const fs::path out = test::scratch_dir("devices-watch-table") / "out.txt";
  // The first table comes after the CUDA module's libraries are loaded (0.8 s on a VM where
  // first-touching memory is slow), the next a second later.
  int status = run_then_interrupt({"devices", "--watch"}, out, std::chrono::milliseconds(3000));
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::string text = test::read_text(out);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  int cpu_rows = 0;
  for (const auto& line : lines_of(text))
    if (line.rfind("cpu ", 0) == 0) ++cpu_rows;
  EXPECT_GE(cpu_rows, 2) << text;
}

}  // namespace
}  // namespace tandem
