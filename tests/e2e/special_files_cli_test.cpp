// Files that are not regular files, through the `tandem` binary (issue 23, item 1): a FIFO or
// /dev/zero given as the config, an IDX or HDF5 dataset, or a checkpoint used to block the reader
// or read without end; each now exits 2 at once, naming the path. Each command runs under
// timeout(1) with SIGKILL (a blocked open ignores the engine's SIGTERM handling), so a
// regression fails the test (exit 137) instead of hanging it.
#include <gtest/gtest.h>

#include <sys/stat.h>

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

}  // namespace
}  // namespace tandem
