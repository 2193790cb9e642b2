// Checkpoint integrity (issue 23, item 5): every array a checkpoint holds carries HDF5's
// Fletcher32 checksum, so one flipped bit in the weights is an error naming the dataset (exit 2)
// for every command that reads the file — it used to load silently (loss 4.3e12 instead of
// 1.12). h5py reads the checksummed file as before; `tandem inspect --verify` reads everything.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using test::run_command;
namespace fs = std::filesystem;

TEST(CheckpointIntegrityCli, AFlippedBitInTheWeightsIsFoundByEveryReader) {
  const fs::path dir = test::scratch_dir("checkpoint-integrity");
  json config = test::tiny_regression_config();
  config["optimizer"] = "adam";  // slots to checksum too
  ASSERT_EQ(test::train_in(dir, "run", config).exit_code, 0);
  const fs::path model = dir / "run" / "model.h5";
  const std::string cli = test::tandem_cli();

  auto r = run_command(cli + " inspect --verify --json " + model.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json verified = json::parse(r.out)["verified"];
  // The kernel, the bias, Adam's four slots, the state, the RNG states: all checksummed.
  EXPECT_GE(verified["checksummed"].get<int>(), 7) << verified;

  // h5py reads it (and sees the filter); then one bit of the kernel's stored bytes flips.
  r = run_command(std::string(test::system_python()) + " -c '\n"
      "import h5py, sys\n"
      "with h5py.File(sys.argv[1], \"r\") as f:\n"
      "  k = f[\"model_weights/dense/dense/kernel:0\"]\n"
      "  assert k.fletcher32 and k.shape == (4, 3), (k.fletcher32, k.shape)\n"
      "  offset = k.id.get_chunk_info(0).byte_offset\n"
      "with open(sys.argv[1], \"r+b\") as raw:\n"
      "  raw.seek(offset + 5); b = raw.read(1); raw.seek(offset + 5)\n"
      "  raw.write(bytes([b[0] ^ 0x10]))\n' " +
      model.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;

  for (const std::string& command :
       {cli + " inspect " + model.string(), cli + " inspect --verify " + model.string(),
        cli + " evaluate --weights " + model.string() + " --split train -q",
        cli + " train --resume " + model.string() + " --set epochs=2 -q",
        cli + " export " + model.string() + " -o " + (dir / "x.onnx").string()}) {
    r = run_command(command);
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.err;
    EXPECT_NE(r.err.find("kernel:0' fails its Fletcher32 checksum"), std::string::npos)
        << command << "\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "x.onnx"));
}

}  // namespace
}  // namespace tandem
