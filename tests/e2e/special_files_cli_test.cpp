// Files that are not regular files, through the `tandem` binary (issue 23, item 1): a FIFO or
// /dev/zero given as the config, an IDX or HDF5 dataset, or a checkpoint used to block the reader
// or read without end; each now exits 2 at once, naming the path. Each command runs under
// timeout(1) with SIGKILL (a blocked open ignores the engine's SIGTERM handling), so a
// regression fails the test (exit 137) instead of hanging it. And the other way: an output given
// as a FIFO or a device (`tandem export -o /dev/null`) was replaced by a regular file.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using test::run_command;
namespace fs = std::filesystem;

TEST(SpecialFilesCli, FifosAndDevicesExitTwoInsteadOfBlocking) {
  const fs::path dir = test::scratch_dir("special-files");
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string cli = "timeout -s KILL 60 " + test::tandem_cli();
  const auto refused = [&](const std::string& args, const std::string& path) {
    auto r = run_command(cli + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(path), std::string::npos) << args << ": " << r.err;
    EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << args << ": " << r.err;
  };
  refused(" check " + fifo.string(), fifo.string());
  refused(" check /dev/zero", "/dev/zero");
  refused(" inspect " + fifo.string(), fifo.string());
  const fs::path mlp = test::source_dir() / "resources/configs/fashion-mlp.json";
  refused(" evaluate --weights /dev/zero " + mlp.string(), "/dev/zero");

  const json dense = {{"class_name", "Dense"}, {"config", {{"units", 2}, {"input_shape", {3}}}}};
  json config = {{"model", {{"class_name", "Sequential"}, {"config", {{"layers", {dense}}}}}},
                 {"loss", "mse"}};
  config["data"]["train"] = {{"type", "hdf5"}, {"path", fifo.string()}};
  test::write_text(dir / "hdf5.json", config.dump());
  refused(" check " + (dir / "hdf5.json").string(), fifo.string());
  config["data"]["train"] = {{"type", "idx"}, {"x", "/dev/zero"}, {"y", fifo.string()}};
  test::write_text(dir / "idx.json", config.dump());
  refused(" check " + (dir / "idx.json").string(), "/dev/zero");
}

// Outputs that are no file to replace: a FIFO, a character device (made here, as root: the same
// device as /dev/null, so a regression replaces this copy, never the system's) and a folder.
// Export, predict and import each refuse them with exit 2 before any work, and leave them as
// they were. Export's '-' writes the ONNX bytes to standard output, unless that is a terminal.
TEST(SpecialFilesCli, OutputsThatAreNoFilesAreRefusedAndLeftAsTheyAre) {
  const fs::path dir = test::scratch_dir("special-outputs");
  ASSERT_EQ(test::train_in(dir, "tiny", test::tiny_regression_config()).exit_code, 0);
  const std::string model = (dir / "tiny" / "model.h5").string();
  const std::string config = (dir / "tiny.json").string();
  const fs::path fifo = dir / "pipe", device = dir / "null", folder = dir / "folder";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directory(folder);
  std::vector<std::pair<fs::path, std::string>> outputs{{fifo, "is a FIFO"},
                                                        {folder, "is a folder"}};
  if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0)
    outputs.emplace_back(device, "is a device");
  const std::string cli = "timeout -s KILL 60 " + test::tandem_cli();
  for (const auto& [output, kind] : outputs) {
    for (const std::string& command :
         {" export " + model + " -o " + output.string(),
          " predict " + config + " --weights " + model + " --format npy -o " + output.string(),
          " import " + model + " -o " + output.string()}) {
      const auto r = run_command(cli + command);
      EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
      EXPECT_NE(r.err.find("config error at '--output': " + output.string() + " " + kind),
                std::string::npos)
          << command << ": " << r.err;
    }
  }
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  if (fs::exists(fs::symlink_status(device))) {
    ASSERT_EQ(::lstat(device.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
  }
  EXPECT_TRUE(fs::is_empty(folder));

  // '-': the same bytes as the file, on standard output; refused on a terminal (script(1) gives
  // the command one), where binary bytes would garble it.
  const fs::path onnx = dir / "tiny.onnx";
  ASSERT_EQ(run_command(cli + " export " + model + " -o " + onnx.string()).exit_code, 0);
  auto r = run_command(cli + " export " + model + " -o - > " + (dir / "stdout.onnx").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("-> standard output"), std::string::npos) << r.err;
  EXPECT_EQ(test::read_text(dir / "stdout.onnx"), test::read_text(onnx));
  r = run_command("script -qec '" + cli + " export " + model + " -o -' /dev/null");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("'-' is standard output, a terminal here"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tandem
