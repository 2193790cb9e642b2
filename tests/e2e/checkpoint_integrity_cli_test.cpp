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
using test::run_python;
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

// Damage HDF5 reads without an error: a chunk index entry moved outside the array (the chunk is
// not found, its values read as the fill value) and a weight created but never written. Both
// loaded silently (every prediction the same constant) and `inspect --verify` said all was well.
TEST(CheckpointIntegrityCli, WeightsNeverStoredAreDamageNotFillValues) {
  const fs::path dir = test::scratch_dir("checkpoint-unstored");
  ASSERT_EQ(test::train_in(dir, "run", test::tiny_regression_config()).exit_code, 0);
  const fs::path model = dir / "run" / "model.h5";
  auto r = run_python(
      dir / "damage.py",
      "import h5py, shutil, struct, sys\n"
      "src, moved, unwritten = sys.argv[1:4]\n"
      "p = 'model_weights/dense/dense/kernel:0'\n"
      "with h5py.File(src, 'r') as f:\n"
      "  d = f[p]; info = d.id.get_chunk_info(0); rank = len(d.shape)\n"
      "key = struct.pack('<II', info.size, info.filter_mask) + b'\\0' * 8 * (rank + 1) + "
      "struct.pack('<Q', info.byte_offset)\n"
      "raw = bytearray(open(src, 'rb').read()); at = raw.find(key); assert at > 0\n"
      "raw[at + 8:at + 16] = struct.pack('<Q', 1 << 20)\n"
      "open(moved, 'wb').write(bytes(raw))\n"
      "with h5py.File(moved, 'r') as f: assert (f[p][()] == 0).all()  # h5py reads zeros\n"
      "shutil.copy(src, unwritten)\n"
      "with h5py.File(unwritten, 'r+') as f:\n"
      "  del f[p]; f.create_dataset(p, shape=(4, 3), dtype='f4', chunks=(4, 3), fillvalue=7.0)\n",
      model.string() + " " + (dir / "moved.h5").string() + " " + (dir / "unwritten.h5").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string cli = test::tandem_cli();
  for (const auto& [file, why] : std::vector<std::pair<std::string, std::string>>{
           {"moved.h5", "its chunk index is damaged (it places a chunk at (1048576, 0), "},
           {"unwritten.h5", "no value of it was ever written"}}) {
    const std::string path = (dir / file).string();
    for (const std::string& command :
         {cli + " inspect --verify " + path,
          cli + " evaluate --weights " + path + " --split train -q",
          cli + " export " + path + " -o " + (dir / "x.onnx").string()}) {
      r = run_command(command);
      EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.err;
      EXPECT_NE(r.err.find("kernel:0' cannot be read whole: " + why), std::string::npos)
          << command << "\n"
          << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(dir / "x.onnx"));
}

// Damage a checksum cannot see, named with the file and the place: a random state of another
// length (it named only the layer), a float64 weight beyond float32's range (it read as Inf and
// was called a diverged run's).
TEST(CheckpointIntegrityCli, AMalformedStateOrAWeightOutOfRangeNamesTheFile) {
  const fs::path dir = test::scratch_dir("checkpoint-malformed");
  json config = test::tiny_regression_config();
  config["model"]["config"]["layers"].push_back(
      {{"class_name", "Dropout"}, {"config", {{"rate", 0.5}, {"name", "drop"}}}});
  ASSERT_EQ(test::train_in(dir, "run", config).exit_code, 0);
  const fs::path model = dir / "run" / "model.h5";
  auto r = run_python(
      dir / "damage.py",
      "import h5py, json, numpy as np, shutil, sys\n"
      "src, rng, wide = sys.argv[1:4]\n"
      "shutil.copy(src, rng); shutil.copy(src, wide)\n"
      "with h5py.File(rng, 'r+') as f:\n"
      "  del f['tandem/rng/drop']; f['tandem/rng/drop'] = np.arange(5, dtype='u8')\n"
      "p = 'model_weights/dense/dense/kernel:0'\n"
      "with h5py.File(wide, 'r+') as f:\n"
      "  k = f[p][()].astype('f8'); k[0, 0] = 1e300; del f[p]; f[p] = k\n"
      "twice, step = sys.argv[4:6]\n"
      "shutil.copy(src, twice); shutil.copy(src, step)\n"
      "with h5py.File(twice, 'r+') as f:\n"
      "  g = f['model_weights']; g.attrs['layer_names'] = np.array([b'dense'] * 600)\n"
      "with h5py.File(step, 'r+') as f:\n"
      "  s = json.loads(bytes(f['tandem/state'][()]).decode()); s['step'] = 2**63 - 1\n"
      "  raw = np.frombuffer(json.dumps(s).encode(), dtype=np.uint8); del f['tandem/state']\n"
      "  f.create_dataset('tandem/state', data=raw, chunks=(len(raw),), fletcher32=True)\n"
      "huge = sys.argv[6]\n"
      "shutil.copy(src, huge)\n"
      "with h5py.File(huge, 'r+') as f:\n"
      "  del f['tandem/state']\n"
      "  f.create_dataset('tandem/state', shape=(3 << 30,), dtype='u1', chunks=(1 << 20,))\n",
      model.string() + " " + (dir / "rng.h5").string() + " " + (dir / "wide.h5").string() + " " +
          (dir / "twice.h5").string() + " " + (dir / "step.h5").string() + " " +
          (dir / "huge.h5").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string train = test::tandem_cli() + " train -q --set epochs=2 --resume ";
  r = run_command(train + (dir / "rng.h5").string() + " --run-dir " + (dir / "a").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find((dir / "rng.h5").string() + ": /tandem/rng/drop: layer 'drop': a random "
                                                   "state has 2 numbers, got 5"),
            std::string::npos)
      << r.err;
  r = run_command(train + (dir / "wide.h5").string() + " --run-dir " + (dir / "b").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("or a value beyond float32's range"), std::string::npos) << r.err;
  // A layer listed 600 times (it read the same kernel 600 times: 2.4 GB from 49 KB of file).
  r = run_command(test::tandem_cli() + " inspect " + (dir / "twice.h5").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("lists 'dense' twice"), std::string::npos) << r.err;
  // A step no run reaches (INT64_MAX wrapped to negative steps, and a checkpoint no resume took).
  r = run_command(train + (dir / "step.h5").string() + " --run-dir " + (dir / "c").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("step is 9223372036854775807, not an integer from 0 to"), std::string::npos)
      << r.err;
  // 3 GiB declared and never written: refused before a buffer of that size (it took 3.1 GB).
  // (AddressSanitizer's shadow needs the address space a limit would take away.)
  const std::string limit = test::kSanitizer ? "" : "ulimit -v 2000000 && ";
  r = run_command(limit + test::tandem_cli() + " inspect " + (dir / "huge.h5").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("cannot be read whole"), std::string::npos) << r.err;
}

// Weights kept outside the checkpoint are refused, not read: external storage (it read
// /etc/passwd's bytes into a bias; a FIFO blocked the read for ever), an external link to another
// file's group, a virtual dataset over another file; and an empty weight name names its place.
TEST(CheckpointIntegrityCli, WeightsKeptInOtherFilesAreRefusedNotRead) {
  const fs::path dir = test::scratch_dir("checkpoint-borrowed");
  ASSERT_EQ(test::train_in(dir, "run", test::tiny_regression_config()).exit_code, 0);
  const fs::path model = dir / "run" / "model.h5";
  const auto r = run_python(
      dir / "borrow.py",
      "import h5py, numpy as np, os, shutil, sys\n"
      "src, d = sys.argv[1:3]\n"
      "os.chdir(d); os.mkfifo('fifo')\n"
      "p = 'model_weights/dense/dense/kernel:0'\n"
      "for name in ['fifo.h5', 'link.h5', 'virtual.h5', 'other.h5', 'empty.h5']:\n"
      "  shutil.copy(src, name)\n"
      "with h5py.File('fifo.h5', 'r+') as f:\n"
      "  shape = f[p].shape; del f[p]\n"
      "  f.create_dataset(p, shape=shape, dtype='f4', external=[('fifo', 0, h5py.h5f.UNLIMITED)])\n"
      "with h5py.File('link.h5', 'r+') as f:\n"
      "  del f['model_weights/dense']\n"
      "  f['model_weights/dense'] = h5py.ExternalLink('other.h5', '/model_weights/dense')\n"
      "with h5py.File('virtual.h5', 'r+') as f:\n"
      "  shape = f[p].shape; del f[p]\n"
      "  layout = h5py.VirtualLayout(shape=shape, dtype='f4')\n"
      "  layout[:] = h5py.VirtualSource('other.h5', p, shape=shape)\n"
      "  f.create_virtual_dataset(p, layout)\n"
      "with h5py.File('empty.h5', 'r+') as f:\n"
      "  f['model_weights/dense'].attrs['weight_names'] = np.array([b''])\n",
      model.string() + " " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [file, expected] : std::vector<std::pair<std::string, std::string>>{
           {"fifo.h5", "dataset '/model_weights/dense/dense/kernel:0' is stored in external files"},
           {"link.h5",
            "'/model_weights/dense' leads through an external link to "
            "'other.h5:/model_weights/dense', which Tandem does not follow"},
           {"virtual.h5", "dataset '/model_weights/dense/dense/kernel:0' is a virtual dataset"},
           {"empty.h5", "dataset '/model_weights/dense/': an empty name"}}) {
    SCOPED_TRACE(file);
    const auto got =
        run_command("timeout 60 " + test::tandem_cli() + " inspect " + (dir / file).string());
    EXPECT_EQ(got.exit_code, 2) << got.err;
    EXPECT_NE(got.err.find(expected), std::string::npos) << got.err;
  }
}

// A weights file declaring more values than the model has is refused before they are read: a
// 4 GiB kernel of compressed zeros (4 MB of file) was read whole before its shape was compared.
TEST(CheckpointIntegrityCli, WeightsBeyondTheModelsSizeAreRefusedBeforeTheyAreRead) {
  const fs::path dir = test::scratch_dir("checkpoint-bomb");
  ASSERT_EQ(test::train_in(dir, "run", test::tiny_regression_config()).exit_code, 0);
  const fs::path model = dir / "run" / "model.h5", bomb = dir / "bomb.h5";
  const auto r = run_python(
      dir / "bomb.py",
      "import h5py, numpy as np, shutil, sys, zlib\n"
      "shutil.copy(sys.argv[1], sys.argv[2])\n"
      "p = 'model_weights/dense/dense/kernel:0'\n"
      "zero = zlib.compress(bytes(16 * 65536 * 4))\n"
      "with h5py.File(sys.argv[2], 'r+') as f:\n"
      "  del f[p]\n"
      "  d = f.create_dataset(p, shape=(1024, 1 << 20), dtype='f4', chunks=(16, 65536),\n"
      "                       compression='gzip')\n"
      "  for r in range(0, 1024, 16):\n"
      "    for c in range(0, 1 << 20, 65536):\n"
      "      d.id.write_direct_chunk((r, c), zero)\n",
      model.string() + " " + bomb.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string limit = test::kSanitizer ? "" : "ulimit -v 3000000 && ";
  const auto got =
      run_command(limit + test::tandem_cli() + " evaluate " +
                  (dir / "run" / "config.json").string() + " --weights " + bomb.string() + " -q");
  EXPECT_EQ(got.exit_code, 2) << got.err;
  EXPECT_NE(got.err.find("dataset '/model_weights/dense/dense/kernel:0' (shape (1024, 1048576)) "
                         "takes the file's weights past the"),
            std::string::npos)
      << got.err;
}

}  // namespace
}  // namespace tandem
