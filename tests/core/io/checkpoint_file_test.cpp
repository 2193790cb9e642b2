#include "tandem/checkpoint_file.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_command;
using test::scratch_dir;
using test::system_python;

// ---- building and comparing checkpoints ----

Tensor random_tensor(Shape shape, std::uint32_t seed) {
  Tensor t(std::move(shape));
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  for (auto& v : t.values()) v = dist(gen);
  return t;
}

json sequential_config(const std::vector<std::string>& dense_names) {
  json layers = json::array();
  layers.push_back({{"class_name", "InputLayer"},
                    {"config", {{"batch_input_shape", {nullptr, 4, 2}}, {"name", "input"}}}});
  for (const auto& name : dense_names)
    layers.push_back({{"class_name", "Dense"},
                      {"config", {{"name", name}, {"units", 3}, {"activation", "relu"}}}});
  return {{"class_name", "Sequential"}, {"config", {{"name", "sequential"}, {"layers", layers}}}};
}

// dense (8→5), flatten (no weights), dense_1 (5→3), plus training state.
CheckpointData sample_checkpoint(std::uint32_t seed = 1) {
  CheckpointData data;
  data.model_config = sequential_config({"dense", "dense_1"});
  data.layers.push_back(
      {"dense", {{"kernel", random_tensor({8, 5}, seed)}, {"bias", random_tensor({5}, seed + 1)}}});
  data.layers.push_back({"flatten", {}});
  data.layers.push_back(
      {"dense_1",
       {{"kernel", random_tensor({5, 3}, seed + 2)}, {"bias", random_tensor({3}, seed + 3)}}});
  // Awkward values must survive bit for bit.
  data.layers[0].weights[0].value[0] = -0.0f;
  data.layers[0].weights[0].value[1] = std::numeric_limits<float>::denorm_min();
  data.layers[0].weights[0].value[2] = std::numeric_limits<float>::infinity();

  TrainingStateData training;
  training.state = {{"epoch", 3},
                    {"step", 120},
                    {"history", {{"loss", {0.9, 0.5, 0.25}}, {"val_loss", {1.0, 0.75, 0.5}}}},
                    {"optimizer", {{"class_name", "Adam"}, {"learning_rate", 0.001}}}};
  // Not alphabetical: the order must be kept.
  training.optimizer_slots = {{"dense_1/kernel/m", random_tensor({5, 3}, seed + 10)},
                              {"dense/kernel/m", random_tensor({8, 5}, seed + 11)},
                              {"dense/kernel/v", random_tensor({8, 5}, seed + 12)},
                              {"iterations", random_tensor({}, seed + 13)}};
  training.rng_states = {{"loader", {1, 2, 3, 0xffffffffffffffffULL}},
                         {"dense/dropout", {42, 0x8000000000000000ULL, 7, 9}}};
  data.training = training;
  return data;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(float)) == 0);
}

void expect_same_tensors(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_TRUE(same_bits(a[i].value, b[i].value)) << a[i].name;
  }
}

void expect_same(const CheckpointData& a, const CheckpointData& b) {
  EXPECT_EQ(a.model_config, b.model_config);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    EXPECT_EQ(a.layers[i].layer, b.layers[i].layer);
    expect_same_tensors(a.layers[i].weights, b.layers[i].weights);
  }
  ASSERT_EQ(a.training.has_value(), b.training.has_value());
  if (!a.training) return;
  EXPECT_EQ(a.training->state, b.training->state);
  expect_same_tensors(a.training->optimizer_slots, b.training->optimizer_slots);
  EXPECT_EQ(a.training->rng_states, b.training->rng_states);
}

// ---- helpers ----

using test::error_of;

test::CommandResult run_python(const fs::path& dir, const std::string& script,
                               const std::string& args) {
  auto file = dir / "script.py";
  test::write_text(file, script);
  return run_command(std::string(system_python()) + " " + file.string() + " " + args);
}

std::vector<std::string> folder_entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Sets /tandem's format_version of an existing file with the HDF5 C API.
void set_format_version(const fs::path& path, int version) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  hid_t group = H5Gopen2(file, "tandem", H5P_DEFAULT);
  hid_t attr = H5Aopen(group, "format_version", H5P_DEFAULT);
  EXPECT_GE(attr, 0);
  EXPECT_GE(H5Awrite(attr, H5T_NATIVE_INT, &version), 0);
  H5Aclose(attr);
  H5Gclose(group);
  EXPECT_GE(H5Fclose(file), 0);
}

// ---- tests ----

TEST(CheckpointFile, RoundTripKeepsEverythingBitForBit) {
  auto path = scratch_dir("ckpt-roundtrip") / "model.h5";
  CheckpointData data = sample_checkpoint();
  data.training->optimizer_slots.push_back({"empty/slot", Tensor()});  // shape (0,)
  data.training->rng_states["unused"] = {};
  write_checkpoint_file(path, data);
  CheckpointData back = read_checkpoint_file(path);
  expect_same(data, back);
  EXPECT_EQ(back.training->optimizer_slots.back().value.shape(), (Shape{0}));
  ASSERT_EQ(back.layers.size(), 3u);
  EXPECT_EQ(back.layers[1].layer, "flatten");
  EXPECT_TRUE(back.layers[1].weights.empty());
  EXPECT_EQ(back.layers[0].weights[0].name, "kernel");
  EXPECT_EQ(back.layers[0].weights[1].name, "bias");
  EXPECT_EQ(back.training->optimizer_slots[0].name, "dense_1/kernel/m");
  EXPECT_EQ(back.training->optimizer_slots[3].value.rank(), 0);
}

TEST(CheckpointFile, WeightsOnlyDataHasNoTrainingGroupAndNoConfig) {
  auto path = scratch_dir("ckpt-weights-only") / "weights.h5";
  CheckpointData data = sample_checkpoint();
  data.training.reset();
  data.model_config = nullptr;
  write_checkpoint_file(path, data);
  CheckpointData back = read_checkpoint_file(path);
  expect_same(data, back);
  EXPECT_FALSE(back.training.has_value());
  EXPECT_TRUE(back.model_config.is_null());
}

TEST(CheckpointFile, H5pyReadsItAsKerasWould) {
  auto dir = scratch_dir("ckpt-h5py-read");
  auto path = dir / "model.h5";
  CheckpointData data = sample_checkpoint(7);
  write_checkpoint_file(path, data);

  // Decodes like Keras 2.15's load_attributes_from_hdf5_group and checks the string types.
  const std::string script = R"PY(
import json, sys
import h5py, numpy as np
def s(v): return v.decode('utf8') if hasattr(v, 'decode') else v
def fixed(obj, name):
    t = obj.attrs.get_id(name).get_type()
    return isinstance(t, h5py.h5t.TypeStringID) and not t.is_variable_str()
with h5py.File(sys.argv[1], 'r') as f:
    print('VERSION ' + s(f.attrs['keras_version']))
    assert s(f.attrs['backend']) == 'tensorflow'
    assert all(fixed(f, n) for n in ('keras_version', 'backend', 'model_config'))
    assert isinstance(f.attrs['model_config'], bytes)
    print('CONFIG ' + json.dumps(json.loads(s(f.attrs['model_config']))))
    mw = f['model_weights']
    assert s(mw.attrs['backend']) == 'tensorflow'
    assert s(mw.attrs['keras_version']) == s(f.attrs['keras_version'])
    assert fixed(mw, 'layer_names') and mw.attrs['layer_names'].dtype.kind == 'S'
    names = [s(n) for n in mw.attrs['layer_names']]
    print('LAYERS ' + ','.join(names))
    for n in names:
        wn = [s(w) for w in mw[n].attrs['weight_names']]
        assert mw[n].attrs['weight_names'].shape == (len(wn),)
        shapes = []
        for w in wn:
            d = mw[n][w]
            assert d.dtype == np.float32
            shapes.append('x'.join(str(x) for x in d.shape))
        print('WEIGHTS %s [%s] [%s]' % (n, ','.join(wn), ','.join(shapes)))
    k = f['model_weights/dense/dense/kernel:0'][()]
    print('SUM %.17g' % float(np.sum(k[np.isfinite(k)], dtype=np.float64)))
    print('BITS %08x' % k.view(np.uint32).reshape(-1)[3])
    t = f['tandem']
    print('FORMAT %d' % t.attrs['format_version'])
    print('EPOCH %d' % json.loads(bytes(t['state'][()]).decode())['epoch'])
    print('SLOTS ' + ','.join(s(x) for x in t['optimizer'].attrs['slot_names']))
    print('RNG %d' % t['rng/loader'][()][3])
)PY";
  auto result = run_python(dir, script, path.string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::istringstream lines(result.out);
  std::map<std::string, std::vector<std::string>> seen;
  for (std::string line; std::getline(lines, line);) {
    auto space = line.find(' ');
    seen[line.substr(0, space)].push_back(line.substr(space + 1));
  }
  ASSERT_EQ(seen["CONFIG"].size(), 1u) << result.out;
  EXPECT_EQ(json::parse(seen["CONFIG"][0]), data.model_config);
  EXPECT_EQ(seen["LAYERS"], std::vector<std::string>{"dense,flatten,dense_1"});
  EXPECT_EQ(seen["WEIGHTS"], (std::vector<std::string>{
                                 "dense [dense/kernel:0,dense/bias:0] [8x5,5]",
                                 "flatten [] []",
                                 "dense_1 [dense_1/kernel:0,dense_1/bias:0] [5x3,3]",
                             }));
  double sum = 0;
  for (float v : data.layers[0].weights[0].value.values())
    if (std::isfinite(v)) sum += v;
  ASSERT_EQ(seen["SUM"].size(), 1u) << result.out;
  EXPECT_NEAR(std::stod(seen["SUM"][0]), sum, 1e-9);
  std::uint32_t bits;
  std::memcpy(&bits, &data.layers[0].weights[0].value[3], 4);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", bits);
  EXPECT_EQ(seen["BITS"], std::vector<std::string>{hex});
  EXPECT_EQ(seen["FORMAT"], std::vector<std::string>{"1"});
  EXPECT_EQ(seen["EPOCH"], std::vector<std::string>{"3"});
  EXPECT_EQ(seen["SLOTS"],
            std::vector<std::string>{"dense_1/kernel/m,dense/kernel/m,dense/kernel/v,iterations"});
  EXPECT_EQ(seen["RNG"], std::vector<std::string>{"18446744073709551615"});
  // The Keras whose definitions the model follows: its config names none, so Tandem's own (Keras
  // 3); a Keras 2 model config's version is kept (hard_sigmoid differs, nn/keras_generation.hpp).
  EXPECT_EQ(seen["VERSION"], std::vector<std::string>{"3.0.0"});
  EXPECT_EQ(read_checkpoint_file(path).keras_version, "3.0.0");
  data.model_config["keras_version"] = "2.15.0";
  write_checkpoint_file(path, data);
  result = run_python(dir, script, path.string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("VERSION 2.15.0\n"), std::string::npos) << result.out;
}

TEST(CheckpointFile, ReadsKerasStyleFilesWrittenByH5py) {
  auto dir = scratch_dir("ckpt-h5py-write");
  // A save_model file with h5py 3's variable-length str attributes (Keras 2.15 writes `[]` for a
  // layer without weights, a float64 empty array), and a save_weights file with everything at
  // the root and fixed-length names, Keras 3 style (no ":0").
  const std::string script = R"PY(
import json, sys
import h5py, numpy as np
cfg = {'class_name': 'Sequential', 'config': {'name': 'seq', 'layers': []}}
with h5py.File(sys.argv[1], 'w') as f:
    f.attrs['keras_version'] = '2.15.0'
    f.attrs['backend'] = 'tensorflow'
    f.attrs['model_config'] = json.dumps(cfg)
    mw = f.create_group('model_weights')
    mw.attrs['layer_names'] = ['dense', 'flatten', 'dense_1']
    g = mw.create_group('dense')
    g.attrs['weight_names'] = ['dense/kernel:0', 'dense/bias:0']
    g.create_dataset('dense/kernel:0', data=np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5)
    g.create_dataset('dense/bias:0', data=np.array([1.5, -2.0, 3.25], dtype=np.float64))
    mw.create_group('flatten').attrs['weight_names'] = []
    g = mw.create_group('dense_1')
    g.attrs['weight_names'] = np.array([b'dense_1/kernel:0'])
    g.create_dataset('dense_1/kernel:0', data=np.ones((3, 1), dtype=np.float32))
with h5py.File(sys.argv[2], 'w') as f:
    f.attrs['layer_names'] = np.array([b'dense', b'dropout'])
    f.attrs['backend'] = np.bytes_(b'tensorflow')
    g = f.create_group('dense')
    g.attrs['weight_names'] = np.array([b'dense/kernel', b'dense/bias'])
    g.create_dataset('dense/kernel', data=np.full((2, 2), 0.25, dtype=np.float32))
    g.create_dataset('dense/bias', data=np.zeros((2,), dtype=np.float32))
    f.create_group('dropout').attrs['weight_names'] = np.array([], dtype='S')
)PY";
  auto model = dir / "keras_model.h5";
  auto weights = dir / "keras_weights.h5";
  auto result = run_python(dir, script, model.string() + " " + weights.string());
  ASSERT_EQ(result.exit_code, 0) << result.err;

  CheckpointData m = read_checkpoint_file(model);
  EXPECT_EQ(m.model_config["config"]["name"], "seq");
  EXPECT_FALSE(m.training.has_value());
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[0].layer, "dense");
  ASSERT_EQ(m.layers[0].weights.size(), 2u);
  EXPECT_EQ(m.layers[0].weights[0].name, "kernel");
  EXPECT_EQ(m.layers[0].weights[0].value.shape(), (Shape{2, 3}));
  EXPECT_EQ(m.layers[0].weights[0].value[5], 2.5f);
  EXPECT_EQ(m.layers[0].weights[1].name, "bias");
  EXPECT_EQ(m.layers[0].weights[1].value[2], 3.25f);
  EXPECT_TRUE(m.layers[1].weights.empty());
  ASSERT_EQ(m.layers[2].weights.size(), 1u);
  EXPECT_EQ(m.layers[2].weights[0].value.shape(), (Shape{3, 1}));

  CheckpointData w = read_checkpoint_file(weights);
  EXPECT_TRUE(w.model_config.is_null());
  ASSERT_EQ(w.layers.size(), 2u);
  ASSERT_EQ(w.layers[0].weights.size(), 2u);
  EXPECT_EQ(w.layers[0].weights[0].name, "kernel");
  EXPECT_EQ(w.layers[0].weights[0].value[3], 0.25f);
  EXPECT_EQ(w.layers[0].weights[1].name, "bias");
  EXPECT_EQ(w.layers[1].layer, "dropout");
  EXPECT_TRUE(w.layers[1].weights.empty());
}

TEST(CheckpointFile, SplitsLongAttributeArraysLikeKeras) {
  auto dir = scratch_dir("ckpt-split");
  auto path = dir / "big.h5";
  CheckpointData data;
  std::vector<std::string> names;
  for (int i = 0; i < 3000; ++i) {
    names.push_back("a_rather_long_layer_name_for_the_attribute_split_" + std::to_string(i));
    data.layers.push_back({names.back(), {}});
  }
  data.layers[1234].weights.push_back({"kernel", random_tensor({2, 2}, 5)});
  // model_config lists every layer too: > 64 KiB in one attribute.
  data.model_config = sequential_config(names);
  ASSERT_GT(data.model_config.dump().size(), 64512u);
  write_checkpoint_file(path, data);
  expect_same(data, read_checkpoint_file(path));

  // Compares with what Keras's save_attributes_to_hdf5_group would have written.
  const std::string script = R"PY(
import json, sys
import h5py, numpy as np
with h5py.File(sys.argv[1], 'r') as f:
    mw = f['model_weights']
    assert 'layer_names' not in mw.attrs
    keys = sorted((k for k in mw.attrs.keys() if k.startswith('layer_names')), key=lambda k: int(k[11:]))
    chunks = [mw.attrs[k] for k in keys]
    names = [n.decode('utf8') for c in chunks for n in c]
    data = np.asarray([n.encode('utf8') for n in names])
    num = 1
    expected = np.array_split(data, num)
    while any(x.nbytes > 64512 for x in expected):
        num += 1
        expected = np.array_split(data, num)
    assert len(chunks) == len(expected) and all(a.dtype == b.dtype and (a == b).all() for a, b in zip(chunks, expected))
    print(' '.join(keys))
    print(len(names), names[0], names[-1])
    print(len(json.loads(f.attrs['model_config'])['config']['layers']))
)PY";
  auto result = run_python(dir, script, path.string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "layer_names0 layer_names1 layer_names2\n3000 " + names.front() + " " +
                            names.back() + "\n3001\n");
}

// Large arrays are stored in checksummed chunks of at most 4 MiB (docs/checkpoint-format.md),
// the array halved along its largest axis: a 1536 x 1000 kernel (6 MB) in chunks of 768 x 1000,
// a 3 x 3 x 64 x 2048 one (4.7 MB) in 3 x 3 x 64 x 1024. h5py reads the same bits.
TEST(CheckpointFile, LargeArraysAreStoredInChecksummedChunksOfAtMostFourMiB) {
  auto dir = scratch_dir("ckpt-chunks");
  auto path = dir / "model.h5";
  CheckpointData data;
  data.layers.push_back({"big",
                         {{"kernel", random_tensor({1536, 1000}, 3)},
                          {"conv", random_tensor({3, 3, 64, 2048}, 4)},
                          {"bias", random_tensor({1000}, 5)}}});
  write_checkpoint_file(path, data);
  expect_same(data, read_checkpoint_file(path));
  const std::string script = R"PY(
import sys
import h5py, numpy as np
with h5py.File(sys.argv[1], 'r') as f:
    for name in ('kernel', 'conv', 'bias'):
        d = f['model_weights/big/big/%s:0' % name]
        assert d.fletcher32, name
        v = d[()]
        print('%s %s %s %016x' % (name, 'x'.join(map(str, d.chunks)), d.id.get_num_chunks(),
              int(v.view(np.uint32).astype(np.uint64).sum())))
)PY";
  auto result = run_python(dir, script, path.string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto bit_sum = [](const Tensor& t) {
    std::uint64_t sum = 0;
    for (float v : t.values()) {
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      sum += bits;
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(sum));
    return std::string(hex);
  };
  const auto& w = data.layers[0].weights;
  EXPECT_EQ(result.out, "kernel 768x1000 2 " + bit_sum(w[0].value) + "\n" +
                            "conv 3x3x64x1024 2 " + bit_sum(w[1].value) + "\n" +
                            "bias 1000 1 " + bit_sum(w[2].value) + "\n");
}

TEST(CheckpointFile, FailedWriteLeavesPreviousFileWhole) {
  auto dir = scratch_dir("ckpt-failed-write");
  auto path = dir / "ckpt.h5";
  CheckpointData a = sample_checkpoint(1);
  write_checkpoint_file(path, a);
  const std::string bytes_a = test::read_text(path);

  // B needs 8 MB; a 1 MiB file-size limit makes the write fail midway, as a full disk would.
  CheckpointData b = sample_checkpoint(2);
  b.layers[0].weights[0].value = random_tensor({1024, 2048}, 3);
  rlimit old_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limit = old_limit;
  limit.rlim_cur = 1 << 20;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::string message = error_of<RunError>([&] { write_checkpoint_file(path, b); });
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_EQ(test::read_text(path), bytes_a);
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"ckpt.h5"});  // no temp file left
  expect_same(a, read_checkpoint_file(path));

  // And the same write goes through once there is room.
  write_checkpoint_file(path, b);
  expect_same(b, read_checkpoint_file(path));
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"ckpt.h5"});
}

TEST(CheckpointFile, WriteThatCannotCreateItsFileIsRunError) {
  auto dir = scratch_dir("ckpt-no-folder");
  test::write_text(dir / "plain.txt", "not a folder");
  auto path = dir / "plain.txt" / "ckpt.h5";
  std::string message =
      error_of<RunError>([&] { write_checkpoint_file(path, sample_checkpoint()); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"plain.txt"});
}

TEST(CheckpointFile, CreatesMissingParentFolders) {
  auto path = scratch_dir("ckpt-parents") / "a" / "b" / "ckpt.h5";
  write_checkpoint_file(path, sample_checkpoint());
  expect_same(sample_checkpoint(), read_checkpoint_file(path));
}

TEST(CheckpointFile, InvalidNamesAreRefusedBeforeWriting) {
  auto dir = scratch_dir("ckpt-bad-names");
  auto path = dir / "ckpt.h5";
  CheckpointData slash = sample_checkpoint();
  slash.layers[0].layer = "a/b";
  EXPECT_NE(error_of<RunError>([&] {
              write_checkpoint_file(path, slash);
            }).find("invalid layer name 'a/b'"),
            std::string::npos);
  CheckpointData twice = sample_checkpoint();
  twice.layers[2].layer = "dense";
  EXPECT_NE(error_of<RunError>([&] {
              write_checkpoint_file(path, twice);
            }).find("duplicate layer name 'dense'"),
            std::string::npos);
  CheckpointData dot = sample_checkpoint();
  dot.training->optimizer_slots[0].name = "dense/./m";
  EXPECT_NE(error_of<RunError>([&] { write_checkpoint_file(path, dot); }).find("invalid"),
            std::string::npos);
  EXPECT_TRUE(folder_entries(dir).empty());
}

TEST(CheckpointFile, TruncatedFileIsDataErrorNamingThePath) {
  auto dir = scratch_dir("ckpt-truncated");
  auto path = dir / "full.h5";
  write_checkpoint_file(path, sample_checkpoint());
  std::string bytes = test::read_text(path);
  auto cut = dir / "cut.h5";
  test::write_text(cut, bytes.substr(0, bytes.size() / 2));
  std::string message = error_of<DataError>([&] { read_checkpoint_file(cut); });
  EXPECT_NE(message.find(cut.string()), std::string::npos) << message;
  EXPECT_NE(message.find("truncated or corrupt"), std::string::npos) << message;
}

TEST(CheckpointFile, TextFileIsNotHdf5) {
  auto path = scratch_dir("ckpt-text") / "notes.h5";
  test::write_text(path, "just some text, long enough to hold a superblock if it were one\n");
  std::string message = error_of<DataError>([&] { read_checkpoint_file(path); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("not an HDF5 file"), std::string::npos) << message;
}

TEST(CheckpointFile, MissingFileNamesThePath) {
  auto path = scratch_dir("ckpt-missing") / "nowhere.h5";
  std::string message = error_of<DataError>([&] { read_checkpoint_file(path); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("no such file"), std::string::npos) << message;
}

TEST(CheckpointFile, Hdf5FileWithoutKerasLayoutIsRefused) {
  auto path = scratch_dir("ckpt-other-hdf5") / "other.h5";
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  H5Fclose(file);
  std::string message = error_of<DataError>([&] { read_checkpoint_file(path); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("not a Keras/Tandem checkpoint"), std::string::npos) << message;
}

// Keras 3's save_weights() (.weights.h5) and its .keras archives: another layout, refused in
// words that say how to get one Tandem reads. The files are laid out as Keras 3.0-3.6's
// saving_lib writes them (keras/src/saving/saving_lib.py: a `vars` group per visited object,
// layers under layers/<snake-case class name, numbered>, the optimizer's under optimizer/vars;
// a .keras file is a zip of metadata.json, config.json and model.weights.h5).
TEST(CheckpointFile, NewerFormatVersionIsRefused) {
  auto path = scratch_dir("ckpt-future") / "future.h5";
  write_checkpoint_file(path, sample_checkpoint());
  set_format_version(path, kCheckpointFormatVersion + 1);
  std::string message = error_of<DataError>([&] { read_checkpoint_file(path); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("written by a newer Tandem; format 2, this build reads ≤ 1"),
            std::string::npos)
      << message;
}

TEST(CheckpointFile, TenRoundTripsKeepStructureAndSize) {
  auto path = scratch_dir("ckpt-ten") / "ckpt.h5";
  CheckpointData data = sample_checkpoint();
  write_checkpoint_file(path, data);
  const std::string first = test::read_text(path);
  for (int i = 0; i < 10; ++i) {
    CheckpointData back = read_checkpoint_file(path);
    expect_same(data, back);
    write_checkpoint_file(path, back);
    EXPECT_EQ(fs::file_size(path), first.size()) << "round trip " << i;
    EXPECT_EQ(test::read_text(path), first) << "round trip " << i;  // no timestamps, no nesting
  }
}

TEST(CheckpointFile, ConcurrentWritersAndReadersAreSerialised) {
  auto dir = scratch_dir("ckpt-threads");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto path = dir / ("ckpt" + std::to_string(t) + ".h5");
      CheckpointData data = sample_checkpoint(static_cast<std::uint32_t>(t));
      try {
        for (int i = 0; i < 5; ++i) {
          write_checkpoint_file(path, data);
          CheckpointData back = read_checkpoint_file(path);
          if (!same_bits(back.layers[0].weights[0].value, data.layers[0].weights[0].value))
            ++failures;
        }
      } catch (const std::exception&) {
        ++failures;
      }
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(folder_entries(dir).size(), 4u);
}

}  // namespace
}  // namespace tandem
