// libFuzzer target for the checkpoint reader (io/checkpoint_file.cpp) and what a resume does with
// a checkpoint (Model::load_weights, Trainer::restore). A real checkpoint of a small model with
// training state (Dense, BatchNormalization, Dropout; Adam slots; RNG states) is written once;
// each input then edits a copy of it through the HDF5 API — string and integer attributes set
// to the fuzzer's text (model_config, layer_names, weight_names, format_version, ...), the JSON
// training state replaced, objects deleted, datasets replaced by others of any type and shape,
// or their values overwritten — and the copy is read, verified, loaded into the model and
// restored into the trainer. The same model's weights in Keras 3's layout (io/keras3_weights.hpp)
// are edited the same way — and groups or datasets added under fuzzed names — read and loaded
// too, alone as a .weights.h5 or packed into a .keras archive (io/keras_archive.hpp) with the
// fuzzer's config.json and metadata.json, stored or deflated, maybe cut short. (Raw HDF5 bytes
// are not fuzzed: that would fuzz libhdf5's parser, which is not Tandem's code.) Every edit must
// end as a tandem::Error or be read correctly; anything else is a finding.
#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>
#include <zip.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "data/data_loader.hpp"
#include "data/dataset.hpp"
#include "fuzz_support.hpp"
#include "hdf5_fuzz_support.hpp"
#include "io/hdf5_handle.hpp"
#include "io/hdf5_lock.hpp"
#include "nn/keras3_weight_paths.hpp"
#include "nn/objective.hpp"
#include "optim/optimizer.hpp"
#include "parallel/replica_model.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "train/trainer.hpp"

namespace {

using nlohmann::json;
using tandem::H5Handle;

const json kModel = json::parse(R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
    {"class_name": "Dense", "config": {"name": "dense", "units": 8, "activation": "relu"}},
    {"class_name": "BatchNormalization", "config": {"name": "bn"}},
    {"class_name": "Dropout", "config": {"name": "drop", "rate": 0.1}},
    {"class_name": "Dense", "config": {"name": "out", "units": 3}}]}})");

// A model, its optimizer and a trainer over them: what `tandem train --resume` restores into.
// The optimizer is loss-scaled (Keras' LossScaleOptimizer), so the state's loss_scale is read too.
struct Training {
  std::unique_ptr<tandem::Model> model = tandem::Model::from_config(kModel, "model", 1);
  std::unique_ptr<tandem::Optimizer> optimizer = tandem::make_optimizer(
      json::parse(R"({"class_name": "LossScaleOptimizer", "config": {"inner_optimizer": "adam",
                      "initial_scale": 4.0, "dynamic_growth_steps": 3}})"),
      "optimizer");
  tandem::ReplicaModel meta{*model, *optimizer, tandem::DevicePlan::cpus(1)};
  tandem::Trainer trainer{meta, tandem::make_objective(json("mse"), json(), json::array(), *model,
                                                       json())};
};

// The bytes of a checkpoint after one epoch of training.
std::string base_checkpoint(const tandem::fuzz::ScratchFile& file) {
  Training t;
  const auto data = tandem::make_dataset(
      json::parse(R"({"type": "synthetic", "task": "regression", "samples": 32, "x_shape": [4],
                      "y_shape": [3]})"),
      "data.train", "");
  tandem::DataLoader loader(data, {8, true, 3, 0});
  t.trainer.fit(loader, nullptr, {1});
  tandem::write_checkpoint_file(file.path(), t.trainer.checkpoint());
  std::ifstream in(file.path(), std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The same model's weights in Keras 3's layout: layers/<class group>/vars/<i>, empty groups for
// the layers without weights, an optimizer group.
std::string base_keras3_weights(const tandem::fuzz::ScratchFile& file) {
  Training t;
  std::vector<std::string> classes;
  for (std::size_t i = 0; i < t.model->layer_count(); ++i)
    classes.push_back(t.model->layer(i).class_name());
  const std::vector<std::string> groups = tandem::nn::keras3_layer_groups(classes);
  {
    std::lock_guard lock(tandem::hdf5_mutex());
    H5Handle f(H5Fcreate(file.path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    H5Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    H5Handle(H5Gcreate2(f.get(), "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    const auto write = [&](const std::string& path, const tandem::Tensor& value) {
      std::vector<hsize_t> dims(value.shape().begin(), value.shape().end());
      H5Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                     H5Sclose);
      H5Handle set(H5Dcreate2(f.get(), path.c_str(), H5T_IEEE_F32LE, space.get(), lcpl.get(),
                              H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose);
      H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, value.data());
    };
    for (std::size_t i = 0; i < groups.size(); ++i) {
      const auto params = t.model->layer(i).parameters();
      const std::string group = "layers/" + groups[i] + "/vars";
      if (params.empty())
        H5Handle(H5Gcreate2(f.get(), group.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                 H5Gclose);
      for (std::size_t j = 0; j < params.size(); ++j)
        write(group + "/" + std::to_string(j), params[j]->value);
    }
    write("optimizer/vars/0", tandem::Tensor({1}));
  }
  std::ifstream in(file.path(), std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `members` (name, bytes) zipped into `path`, each stored or deflated as the input says.
void write_zip(const std::filesystem::path& path,
               const std::vector<std::pair<std::string, std::string>>& members,
               FuzzedDataProvider& input) {
  zipFile zip = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
  if (!zip) return;
  for (const auto& [name, bytes] : members) {
    const int method = input.ConsumeBool() ? Z_DEFLATED : 0;
    if (zipOpenNewFileInZip64(zip, name.c_str(), nullptr, nullptr, 0, nullptr, 0, nullptr, method,
                              Z_DEFAULT_COMPRESSION, 0) != ZIP_OK)
      continue;
    zipWriteInFileInZip(zip, bytes.data(), static_cast<unsigned>(bytes.size()));
    zipCloseFileInZip(zip);
  }
  zipClose(zip, nullptr);
}

// A .keras archive of the edited weights at `weights` and the fuzzer's configs, maybe cut short.
void pack_archive(const tandem::fuzz::ScratchFile& weights,
                  const tandem::fuzz::ScratchFile& archive, FuzzedDataProvider& input) {
  std::ifstream in(weights.path(), std::ios::binary);
  std::string image{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::pair<std::string, std::string>> members;
  members.emplace_back("metadata.json", input.ConsumeBool()
                                            ? std::string(R"({"keras_version": "3.6.0"})")
                                            : input.ConsumeRandomLengthString(256));
  members.emplace_back(input.ConsumeBool() ? "config.json" : input.ConsumeRandomLengthString(16),
                       input.ConsumeBool() ? kModel.dump() : input.ConsumeRandomLengthString(2048));
  members.emplace_back(input.ConsumeBool() ? "model.weights.h5" : "model.weights.npz",
                       std::move(image));
  if (input.ConsumeBool())  // a member twice
    members.push_back(members[input.ConsumeIntegralInRange<std::size_t>(0, 2)]);
  write_zip(archive.path(), members, input);
  if (input.ConsumeBool()) {  // cut short
    std::error_code ec;
    const auto size = std::filesystem::file_size(archive.path(), ec);
    if (!ec)
      std::filesystem::resize_file(archive.path(),
                                   input.ConsumeIntegralInRange<std::uintmax_t>(0, size), ec);
  }
}

struct Objects {
  std::vector<std::string> all;       // every group and dataset, "/model_weights/dense"
  std::vector<std::string> datasets;
};

Objects objects_of(hid_t file) {
  Objects out;
  H5Ovisit(
      file, H5_INDEX_NAME, H5_ITER_NATIVE,
      [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
        auto& o = *static_cast<Objects*>(data);
        const std::string path = std::string("/") + name;
        if (path == "/.") return 0;
        o.all.push_back(path);
        if (info->type == H5O_TYPE_DATASET) o.datasets.push_back(path);
        return 0;
      },
      &out);
  return out;
}

void set_string_attr(hid_t loc, const std::string& name, const std::string& text) {
  if (H5Aexists(loc, name.c_str()) > 0) H5Adelete(loc, name.c_str());
  H5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<std::size_t>(text.size(), 1));
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle attr(H5Acreate2(loc, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose);
  std::string padded = text;
  padded.resize(std::max<std::size_t>(text.size(), 1), '\0');
  if (attr.valid()) H5Awrite(attr.get(), type.get(), padded.data());
}

void set_string_list_attr(hid_t loc, const std::string& name, FuzzedDataProvider& input) {
  if (H5Aexists(loc, name.c_str()) > 0) H5Adelete(loc, name.c_str());
  const hsize_t n = input.ConsumeIntegralInRange<hsize_t>(0, 6);
  const std::size_t width = input.ConsumeIntegralInRange<std::size_t>(1, 24);
  std::string cells;
  for (hsize_t i = 0; i < n; ++i) {
    std::string item = input.ConsumeRandomLengthString(width);
    item.resize(width, '\0');
    cells += item;
  }
  H5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), width);
  H5Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  H5Handle attr(H5Acreate2(loc, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose);
  if (attr.valid() && n > 0) H5Awrite(attr.get(), type.get(), cells.data());
}

void set_int_attr(hid_t loc, const std::string& name, long long value) {
  if (H5Aexists(loc, name.c_str()) > 0) H5Adelete(loc, name.c_str());
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle attr(H5Acreate2(loc, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose);
  if (attr.valid()) H5Awrite(attr.get(), H5T_NATIVE_LLONG, &value);
}

const std::string& pick(FuzzedDataProvider& input, const std::vector<std::string>& from) {
  return from[input.ConsumeIntegralInRange<std::size_t>(0, from.size() - 1)];
}

// One edit of the open file, as the fuzzer chooses.
void edit(hid_t file, FuzzedDataProvider& input) {
  static const std::vector<std::string> attr_names = {
      "model_config", "training_config", "keras_version", "backend",   "layer_names",
      "weight_names", "format_version",  "slot_names",    "names",     "x"};
  const Objects objects = objects_of(file);
  std::vector<std::string> places = objects.all;
  places.push_back("/");
  switch (input.ConsumeIntegralInRange(0, 6)) {
    case 0: {  // a string attribute
      H5Handle obj(H5Oopen(file, pick(input, places).c_str(), H5P_DEFAULT), H5Oclose);
      if (obj.valid())
        set_string_attr(obj.get(), pick(input, attr_names), input.ConsumeRandomLengthString(4096));
      break;
    }
    case 1: {  // a list-of-names attribute
      H5Handle obj(H5Oopen(file, pick(input, places).c_str(), H5P_DEFAULT), H5Oclose);
      if (obj.valid()) set_string_list_attr(obj.get(), pick(input, attr_names), input);
      break;
    }
    case 2: {  // an integer attribute
      H5Handle obj(H5Oopen(file, pick(input, places).c_str(), H5P_DEFAULT), H5Oclose);
      if (obj.valid())
        set_int_attr(obj.get(), pick(input, attr_names), input.ConsumeIntegral<long long>());
      break;
    }
    case 3:  // an object deleted
      if (!objects.all.empty()) H5Ldelete(file, pick(input, objects.all).c_str(), H5P_DEFAULT);
      break;
    case 4: {  // a dataset replaced by another of any type and shape
      if (objects.datasets.empty()) break;
      const std::string path = pick(input, objects.datasets);
      H5Ldelete(file, path.c_str(), H5P_DEFAULT);
      tandem::fuzz::write_fuzzed_dataset(file, path.c_str(), input);
      break;
    }
    case 5: {  // the JSON training state replaced by the fuzzer's text
      if (H5Lexists(file, "/tandem", H5P_DEFAULT) <= 0) break;
      if (H5Lexists(file, "/tandem/state", H5P_DEFAULT) > 0)
        H5Ldelete(file, "/tandem/state", H5P_DEFAULT);
      const std::string text = input.ConsumeRandomLengthString(8192);
      const hsize_t n = text.size();
      H5Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
      H5Handle set(H5Dcreate2(file, "/tandem/state", H5T_STD_U8LE, space.get(), H5P_DEFAULT,
                              H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose);
      if (set.valid() && n > 0)
        H5Dwrite(set.get(), H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data());
      break;
    }
    case 6: {  // a group or a dataset added under a fuzzed name ("vars", "12", "_query_dense")
      H5Handle group(H5Gopen2(file, pick(input, places).c_str(), H5P_DEFAULT), H5Gclose);
      const std::string name = input.ConsumeRandomLengthString(12);
      if (!group.valid() || name.empty() || H5Lexists(group.get(), name.c_str(), H5P_DEFAULT) != 0)
        break;
      if (input.ConsumeBool())
        H5Handle(H5Gcreate2(group.get(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 H5Gclose);
      else
        tandem::fuzz::write_fuzzed_dataset(group.get(), name.c_str(), input);
      break;
    }
  }
}

// Reads, verifies and loads the file at `path` as a resume or --weights would.
void read_and_load(const std::filesystem::path& path) {
  try {
    tandem::read_checkpoint_configs(path);
    tandem::verify_checkpoint_file(path);
    const tandem::CheckpointData checkpoint = tandem::read_checkpoint_file(path);
    Training t;
    t.model->load_weights(checkpoint, "fuzz");
    t.trainer.restore(checkpoint, "fuzz");
    if (!checkpoint.model_config.is_null())
      tandem::Model::from_config(checkpoint.model_config, "model_config", 1);
  } catch (const tandem::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const tandem::fuzz::ScratchFile file(".ckpt.h5");
  static const tandem::fuzz::ScratchFile keras3(".weights.h5");
  static const tandem::fuzz::ScratchFile archive(".keras");
  static const bool quiet = (H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr), true);
  (void)quiet;
  static const std::string base = base_checkpoint(file);
  static const std::string base_keras3 = base_keras3_weights(keras3);
  FuzzedDataProvider input(data, size);
  // 0: a Tandem checkpoint; 1: a Keras 3 weights file; 2: one packed in a .keras archive.
  const int kind = input.ConsumeIntegralInRange(0, 2);
  const tandem::fuzz::ScratchFile& edited = kind == 0 ? file : keras3;
  edited.write(kind == 0 ? base : base_keras3);
  {
    std::lock_guard lock(tandem::hdf5_mutex());
    H5Handle f(H5Fopen(edited.path().c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    if (!f.valid()) return 0;
    const int edits = input.ConsumeIntegralInRange(kind == 0 ? 1 : 0, 4);
    for (int i = 0; i < edits && input.remaining_bytes() > 0; ++i) edit(f.get(), input);
  }
  if (kind == 2) pack_archive(keras3, archive, input);
  read_and_load(kind == 2 ? archive.path() : edited.path());
  return 0;
}
