// Keras 3's own files read as checkpoints (io/keras3_weights.hpp, io/keras_archive.hpp): a
// save_weights() .weights.h5 and a .keras archive (zipped, stored or deflated, and unzipped as a
// folder), made by h5py and zipfile in the layout Keras 3's saving_lib writes — empty vars groups,
// sublayer groups, an optimizer group, a bfloat16 variable, eleven variables in one group (so
// "10" must come after "9"); and what is refused, each time naming the file and the place.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

using test::error_of;

constexpr const char* kWriteKeras3Files = R"PY(
import h5py, io, json, numpy as np, os, sys, zipfile
out = sys.argv[1]
def weights(f):
    f.create_group("vars")
    f.create_group("layers/input_layer/vars")
    d = f.create_group("layers/dense/vars")
    d.create_dataset("0", data=np.arange(12, dtype="float32").reshape(4, 3))
    d.create_dataset("1", data=np.array([0.5, -1, 2], "float32"))
    many = f.create_group("layers/many/vars")
    for i in range(11):
        many.create_dataset(str(i), data=np.array(i, "float32"))
    f.create_group("layers/multi_head_attention/vars")
    q = f.create_group("layers/multi_head_attention/query_dense/vars")
    q.create_dataset("0", data=np.ones((8, 2, 4), "float32"))
    q.create_dataset("1", data=np.zeros((2, 4), "float32"))
    f.create_group("layers/multi_head_attention/_softmax/vars")
    # bfloat16 as Keras 3 stores it: the upper halves of float32s, an opaque 2-byte type.
    bits = (np.array([1.0, -2.5, 3.140625], "float32").view("uint32") >> 16).astype("uint16")
    bf = f.create_group("layers/bf/vars").create_dataset("0", data=bits.view("V2"))
    bf.attrs["dtype"] = "bfloat16"
    o = f.create_group("optimizer/vars")
    o.create_dataset("0", data=np.array(7, "int64"))
    o.create_dataset("1", data=np.array(0.001, "float32"))
with h5py.File(os.path.join(out, "w.weights.h5"), "w") as f:
    weights(f)
image = open(os.path.join(out, "w.weights.h5"), "rb").read()
policy = {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
          "registered_name": None, "shared_object_id": 139872412345680}
config = {"module": "keras", "class_name": "Sequential",
          "config": {"name": "s", "layers": [], "dtype": policy},
          "registered_name": None,
          "compile_config": {"optimizer": "adam", "loss": "mse", "metrics": ["mae"]}}
metadata = {"keras_version": "3.6.0", "date_saved": "2026-11-30@12:00:00"}
for name, method in (("stored.keras", zipfile.ZIP_STORED), ("deflated.keras", zipfile.ZIP_DEFLATED)):
    with zipfile.ZipFile(os.path.join(out, name), "w", compression=method) as z:
        z.writestr("metadata.json", json.dumps(metadata))
        z.writestr("config.json", json.dumps(config))
        z.writestr("model.weights.h5", image)
folder = os.path.join(out, "unzipped.keras")
os.makedirs(folder, exist_ok=True)
json.dump(metadata, open(os.path.join(folder, "metadata.json"), "w"))
json.dump(config, open(os.path.join(folder, "config.json"), "w"))
open(os.path.join(folder, "model.weights.h5"), "wb").write(image)
)PY";

struct Keras3Files : ::testing::Test {
  static void SetUpTestSuite() {
    dir = new fs::path(test::scratch_dir("keras3-files"));
    auto r = test::run_python(*dir / "write.py", kWriteKeras3Files, dir->string());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  static void TearDownTestSuite() { delete dir; }
  static fs::path* dir;
};
fs::path* Keras3Files::dir = nullptr;

const LayerWeights& group(const CheckpointData& data, const std::string& name) {
  for (const auto& lw : data.layers)
    if (lw.layer == name) return lw;
  throw std::runtime_error("no group " + name);
}

std::vector<std::string> names_of(const LayerWeights& lw) {
  std::vector<std::string> names;
  for (const auto& w : lw.weights) names.push_back(w.name);
  return names;
}

void expect_keras3_weights(const CheckpointData& data) {
  EXPECT_EQ(data.layout, WeightsLayout::keras3);
  std::vector<std::string> groups;
  for (const auto& lw : data.layers) groups.push_back(lw.layer);
  EXPECT_EQ(groups, (std::vector<std::string>{"bf", "dense", "input_layer", "many",
                                              "multi_head_attention"}));
  const LayerWeights& dense = group(data, "dense");
  ASSERT_EQ(names_of(dense), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(dense.weights[0].value.shape(), (Shape{4, 3}));
  EXPECT_EQ(dense.weights[0].value[11], 11.0f);
  EXPECT_EQ(dense.weights[1].value[1], -1.0f);
  const LayerWeights& many = group(data, "many");
  ASSERT_EQ(many.weights.size(), 11u);
  for (std::size_t i = 0; i < many.weights.size(); ++i) {
    EXPECT_EQ(many.weights[i].name, std::to_string(i));
    EXPECT_EQ(many.weights[i].value[0], static_cast<float>(i));
  }
  EXPECT_EQ(names_of(group(data, "multi_head_attention")),
            (std::vector<std::string>{"query_dense/0", "query_dense/1"}));
  EXPECT_TRUE(group(data, "input_layer").weights.empty());
  const LayerWeights& bf = group(data, "bf");
  ASSERT_EQ(bf.weights.size(), 1u);
  ASSERT_EQ(bf.weights[0].value.shape(), (Shape{3}));
  EXPECT_EQ(bf.weights[0].value[0], 1.0f);
  EXPECT_EQ(bf.weights[0].value[1], -2.5f);
  EXPECT_EQ(bf.weights[0].value[2], 3.140625f);
  EXPECT_FALSE(data.training.has_value());
}

TEST_F(Keras3Files, AWeightsFileIsReadAsItsGroupsInTheirOwnOrder) {
  const CheckpointData data = read_checkpoint_file(*dir / "w.weights.h5");
  expect_keras3_weights(data);
  EXPECT_TRUE(data.model_config.is_null());
  EXPECT_TRUE(data.training_config.is_null());
  EXPECT_EQ(read_checkpoint_configs(*dir / "w.weights.h5").layout, WeightsLayout::keras3);
}

TEST_F(Keras3Files, AnArchiveGivesItsConfigItsCompileConfigAndItsWeights) {
  for (const char* name : {"stored.keras", "deflated.keras", "unzipped.keras"}) {
    SCOPED_TRACE(name);
    const CheckpointData data = read_checkpoint_file(*dir / name);
    expect_keras3_weights(data);
    EXPECT_EQ(data.model_config["class_name"], "Sequential");
    EXPECT_FALSE(data.model_config.contains("compile_config"));
    // Keras' object-sharing marks are dropped: the config is what to_json() writes.
    EXPECT_EQ(data.model_config["config"]["dtype"],
              json::parse(R"({"module": "keras", "class_name": "DTypePolicy", "config":
                              {"name": "float32"}, "registered_name": null})"));
    EXPECT_EQ(data.training_config, json::parse(R"({"optimizer": "adam", "loss": "mse",
                                                    "metrics": ["mae"]})"));
    EXPECT_EQ(data.keras_version, "3.6.0");
    const CheckpointData configs = read_checkpoint_configs(*dir / name);
    EXPECT_EQ(configs.model_config, data.model_config);
    EXPECT_EQ(configs.training_config, data.training_config);
    EXPECT_TRUE(configs.layers.empty());
    EXPECT_EQ(verify_checkpoint_file(*dir / name).datasets, 16u);  // 2 + 11 + 2 + 1
  }
}

TEST_F(Keras3Files, TheWeightsAreBoundedByTheModelTheyAreReadFor) {
  const std::string e =
      error_of<DataError>([] { read_checkpoint_file(*dir / "w.weights.h5", 20); });
  EXPECT_NE(e.find("w.weights.h5"), std::string::npos) << e;
  EXPECT_NE(e.find("takes the file's weights past the 20 values"), std::string::npos) << e;
}

constexpr const char* kWriteBadFiles = R"PY(
import h5py, json, numpy as np, os, sys, zipfile
out = sys.argv[1]
def h5(name, build):
    with h5py.File(os.path.join(out, name), "w") as f:
        build(f)
h5("gap.weights.h5", lambda f: [f.create_dataset("layers/dense/vars/" + k, data=np.ones(2, "float32")) for k in ("0", "2")])
h5("named.weights.h5", lambda f: f.create_dataset("layers/dense/vars/kernel", data=np.ones(2, "float32")))
h5("outside.weights.h5", lambda f: f.create_dataset("layers/dense/kernel", data=np.ones(2, "float32")))
h5("own.weights.h5", lambda f: [f.create_dataset("vars/0", data=np.ones(2, "float32")), f.create_group("layers")])
h5("text.weights.h5", lambda f: f.create_dataset("layers/dense/vars/0", data="text"))
good = os.path.join(out, "good.weights.h5")
h5("good.weights.h5", lambda f: f.create_dataset("layers/dense/vars/0", data=np.arange(4096, dtype="float32")))
def archive(name, members, method=zipfile.ZIP_STORED):
    with zipfile.ZipFile(os.path.join(out, name), "w", compression=method) as z:
        for member, data in members.items():
            z.writestr(member, data)
config = json.dumps({"class_name": "Sequential", "config": {"layers": []}})
archive("noconfig.keras", {"a.txt": "x"})
archive("npz.keras", {"config.json": config, "model.weights.npz": b"PK"})
archive("noweights.keras", {"config.json": config, "metadata.json": "{}"})
archive("listconfig.keras", {"config.json": "[1]", "model.weights.h5": b""})
archive("notjson.keras", {"config.json": "{", "model.weights.h5": b""})
archive("badmetadata.keras", {"config.json": config, "metadata.json": "3"})
archive("notweights.keras", {"config.json": config, "model.weights.h5": b"not an hdf5 file"})
archive("twice.keras", {"config.json": config})
with zipfile.ZipFile(os.path.join(out, "twice.keras"), "a") as z:
    import warnings; warnings.simplefilter("ignore")
    z.writestr("config.json", config)
archive("crc.keras", {"config.json": config, "model.weights.h5": open(good, "rb").read()})
path = os.path.join(out, "crc.keras")
with zipfile.ZipFile(path) as z:
    info = z.getinfo("model.weights.h5")
raw = bytearray(open(path, "rb").read())
start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
raw[start + info.file_size - 100] ^= 0x40   # a weight's byte, past HDF5's metadata
open(path, "wb").write(bytes(raw))
open(os.path.join(out, "pk.h5"), "w").write("PK, but not a zip")
# An unzipped archive whose weights are a FIFO: refused, not a read that blocks.
folder = os.path.join(out, "fifo.keras")
os.makedirs(folder, exist_ok=True)
open(os.path.join(folder, "config.json"), "w").write(config)
if not os.path.exists(os.path.join(folder, "model.weights.h5")):
    os.mkfifo(os.path.join(folder, "model.weights.h5"))
)PY";

TEST_F(Keras3Files, WhatIsNotTheirLayoutIsRefusedNamingTheFileAndThePlace) {
  auto r = test::run_python(*dir / "bad.py", kWriteBadFiles, dir->string());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"gap.weights.h5", "'/layers/dense/vars' has no dataset '1' but one numbered 2"},
      {"named.weights.h5", "'/layers/dense/vars/kernel' is not a weight"},
      {"outside.weights.h5", "'/layers/dense/kernel' is a dataset outside a vars group"},
      {"own.weights.h5", "/vars holds variables of the model itself"},
      {"text.weights.h5", "dataset '/layers/dense/vars/0' is not numeric"},
      {"noconfig.keras",
       "a zip archive, but not a Keras .keras file: it has no config.json "
       "(it has 'a.txt')"},
      {"npz.keras", "its weights are in model.weights.npz"},
      {"noweights.keras", "it has no model.weights.h5 (it has 'config.json', 'metadata.json')"},
      {"listconfig.keras", "its config.json is a JSON array, not an object"},
      {"notjson.keras", "its config.json is not valid JSON"},
      {"badmetadata.keras", "its metadata.json is a JSON number, not an object"},
      {"notweights.keras", "its model.weights.h5 is not an HDF5 file, or is truncated or corrupt"},
      {"twice.keras", "member 'config.json' is in the archive 2 times"},
      {"crc.keras", "member 'model.weights.h5' is corrupt (its CRC does not match)"},
      {"pk.h5", "not an HDF5 file"},
      {"fifo.keras", "model.weights.h5': it is a FIFO"},
  };
  for (const auto& [file, expected] : cases) {
    const fs::path path = *dir / file;
    const std::string e = error_of<DataError>([&path] { read_checkpoint_file(path); });
    EXPECT_NE(e.find(path.string()), std::string::npos) << file << ": " << e;
    EXPECT_NE(e.find(expected), std::string::npos) << file << ": " << e;
  }
  // Reading only the configs does not open the weights: an archive with sound configs reads.
  EXPECT_EQ(read_checkpoint_configs(*dir / "crc.keras").model_config["class_name"], "Sequential");
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
