// Checkpoint files in the Keras legacy HDF5 layout (docs/checkpoint-format.md).
#include "tandem/checkpoint_file.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <new>
#include <set>
#include <span>
#include <stdexcept>
#include <string_view>

#include "io/checksummed_chunks.hpp"
#include "io/hdf5_access.hpp"
#include "io/hdf5_handle.hpp"
#include "io/hdf5_links.hpp"
#include "io/hdf5_lock.hpp"
#include "io/hdf5_storage.hpp"
#include "io/keras3_weights.hpp"
#include "io/keras_archive.hpp"
#include "tandem/atomic_file.hpp"
#include "tandem/error.hpp"
#include "tensor/huge_page_block.hpp"
#include "util/json_text.hpp"
#include "util/regular_file.hpp"

namespace tandem {

namespace fs = std::filesystem;

namespace {

using hdf5::attr_exists;
using hdf5::checked;
using hdf5::fail;
using hdf5::handle;
using hdf5::has_checksum;
using hdf5::link_exists;
using hdf5::open_group;
using hdf5::read_all;
using hdf5::read_int_attr;
using hdf5::read_name_list;
using hdf5::read_string_attr;
using hdf5::read_tensor;
using hdf5::read_text_dataset;
using hdf5::read_u64;
using hdf5::require_own_storage;
using hdf5::require_written;
using hdf5::WeightBudget;

// The Keras whose definitions a model follows, stamped at the root and on /model_weights (Keras
// reads it only for Keras 1 files): the model config's own "keras_version" (a Keras 2 model keeps
// Keras 2's definitions, nn/keras_generation.hpp), else Keras 3's, Tandem's own.
constexpr const char* kOwnKerasVersion = "3.0.0";
constexpr const char* kBackend = "tensorflow";
// Keras's HDF5_OBJECT_HEADER_LIMIT: larger attribute arrays are split into name0, name1, ...
constexpr std::size_t kAttributeLimit = 64512;

H5Handle scalar_space() {
  return handle(H5Screate(H5S_SCALAR), H5Sclose, "cannot create dataspace");
}

H5Handle simple_space(const std::vector<hsize_t>& dims) {
  if (dims.empty()) return scalar_space();
  return handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                "cannot create dataspace");
}

// ---- writing ----

// What writing one file needs: the object creation properties (no timestamps, so equal
// checkpoints are equal byte for byte) and the writer of its arrays' chunks.
struct WriteProps {
  H5Handle gcpl = handle(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, "cannot create property list");
  H5Handle dcpl = handle(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "cannot create property list");
  H5Handle lcpl = handle(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "cannot create property list");
  WriteProps() {
    checked(H5Pset_obj_track_times(gcpl.get(), false), "cannot set group properties");
    checked(H5Pset_obj_track_times(dcpl.get(), false), "cannot set dataset properties");
    checked(H5Pset_create_intermediate_group(lcpl.get(), 1), "cannot set link properties");
  }
  ChunkWriter chunks;
};

// A fixed-length, null-padded ASCII string type (numpy dtype 'S<size>').
H5Handle fixed_string_type(std::size_t size) {
  H5Handle type = handle(H5Tcopy(H5T_C_S1), H5Tclose, "cannot create string type");
  checked(H5Tset_size(type.get(), std::max<std::size_t>(size, 1)), "cannot size string type");
  checked(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "cannot set string padding");
  checked(H5Tset_cset(type.get(), H5T_CSET_ASCII), "cannot set string character set");
  return type;
}

void write_string_attr(hid_t obj, const std::string& name, const std::string& value) {
  H5Handle type = fixed_string_type(value.size());
  H5Handle space = scalar_space();
  H5Handle attr =
      handle(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose, "cannot create attribute '" + name + "'");
  std::string buffer = value;
  buffer.resize(std::max<std::size_t>(value.size(), 1), '\0');
  checked(H5Awrite(attr.get(), type.get(), buffer.data()), "cannot write attribute '" + name + "'");
}

void write_string_array_attr(hid_t obj, const std::string& name,
                             std::span<const std::string> values, std::size_t item_size) {
  H5Handle type = fixed_string_type(item_size);
  H5Handle space = simple_space({static_cast<hsize_t>(values.size())});
  H5Handle attr =
      handle(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose, "cannot create attribute '" + name + "'");
  if (values.empty()) return;  // an empty 'S1' array, as np.array([], dtype='S')
  std::string buffer(values.size() * item_size, '\0');
  for (std::size_t i = 0; i < values.size(); ++i)
    std::memcpy(buffer.data() + i * item_size, values[i].data(), values[i].size());
  checked(H5Awrite(attr.get(), type.get(), buffer.data()), "cannot write attribute '" + name + "'");
}

// Keras's save_attributes_to_hdf5_group: one array, or name0, name1, ... split like
// np.array_split when the array is larger than 64512 bytes.
void write_name_list(hid_t obj, const std::string& name, const std::vector<std::string>& values) {
  std::size_t item_size = 1;
  for (const auto& v : values) item_size = std::max(item_size, v.size());
  if (item_size > kAttributeLimit)
    throw std::runtime_error("an entry of attribute '" + name + "' is longer than " +
                             std::to_string(kAttributeLimit) + " bytes");
  const std::size_t n = values.size();
  std::size_t chunks = 1;
  while ((n + chunks - 1) / chunks * item_size > kAttributeLimit) ++chunks;
  if (chunks == 1) {
    write_string_array_attr(obj, name, values, item_size);
    return;
  }
  std::size_t begin = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    std::size_t count = n / chunks + (c < n % chunks ? 1 : 0);
    write_string_array_attr(obj, name + std::to_string(c),
                            std::span<const std::string>(values).subspan(begin, count), item_size);
    begin += count;
  }
}

void write_int_attr(hid_t obj, const std::string& name, int value) {
  H5Handle space = scalar_space();
  H5Handle attr =
      handle(H5Acreate2(obj, name.c_str(), H5T_STD_I32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose, "cannot create attribute '" + name + "'");
  checked(H5Awrite(attr.get(), H5T_NATIVE_INT, &value), "cannot write attribute '" + name + "'");
}

// Creates the groups on the way to `path` ("a/b/c" → a, a/b) so they carry no timestamps.
void create_parent_groups(hid_t loc, const std::string& path, const WriteProps& props) {
  for (std::size_t slash = path.find('/'); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    std::string group = path.substr(0, slash);
    if (link_exists(loc, group)) continue;
    H5Handle g =
        handle(H5Gcreate2(loc, group.c_str(), props.lcpl.get(), props.gcpl.get(), H5P_DEFAULT),
               H5Gclose, "cannot create group '" + group + "'");
  }
}

H5Handle create_group(hid_t loc, const std::string& name, const WriteProps& props) {
  return handle(H5Gcreate2(loc, name.c_str(), props.lcpl.get(), props.gcpl.get(), H5P_DEFAULT),
                H5Gclose, "cannot create group '" + name + "'");
}

// The creation properties of a non-empty array of `dims` elements of `element_bytes`: chunked
// (checkpoint_chunk_shape: at most 4 MiB a chunk) with HDF5's Fletcher32 filter, so a damaged byte
// fails the read instead of loading silently. h5py and Keras read such datasets as any other.
// Small chunks keep HDF5's buffers small when it reads them: one chunk of a 128 MiB kernel took
// 256 MiB of fresh memory to read (seed-mlp's checkpoint read and verified in 5 s instead of 12.5
// on this project's VMs).
H5Handle checksummed_dcpl(const WriteProps& props, const std::vector<hsize_t>& chunk) {
  H5Handle dcpl = handle(H5Pcopy(props.dcpl.get()), H5Pclose, "cannot copy property list");
  checked(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()),
          "cannot set dataset chunks");
  checked(H5Pset_fletcher32(dcpl.get()), "cannot set the dataset checksum");
  return dcpl;
}

// A dataset of `dims` at `path` under `loc`, written from `values` (may be null when empty).
// Arrays are written chunk by chunk, each chunk checksummed here (io/checksummed_chunks.hpp),
// where the memory type is the file's; through HDF5's conversion and filter otherwise.
void write_dataset(hid_t loc, const std::string& path, hid_t file_type, hid_t mem_type,
                   const std::vector<hsize_t>& dims, const void* values, bool is_empty,
                   WriteProps& props) {
  create_parent_groups(loc, path, props);
  H5Handle space = simple_space(dims);
  const bool checksum = !is_empty && !dims.empty();
  const std::size_t element_bytes = H5Tget_size(file_type);
  const std::vector<hsize_t> chunk =
      checksum ? checkpoint_chunk_shape(dims, element_bytes) : std::vector<hsize_t>{};
  H5Handle dcpl = checksum
                      ? checksummed_dcpl(props, chunk)
                      : handle(H5Pcopy(props.dcpl.get()), H5Pclose, "cannot copy property list");
  H5Handle dataset = handle(H5Dcreate2(loc, path.c_str(), file_type, space.get(), props.lcpl.get(),
                                       dcpl.get(), H5P_DEFAULT),
                            H5Dclose, "cannot create dataset '" + path + "'");
  if (is_empty) return;
  if (checksum && H5Tequal(file_type, mem_type) > 0) {
    props.chunks.write(dataset.get(), dims, chunk, element_bytes, values, path);
    return;
  }
  checked(H5Dwrite(dataset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values),
          "cannot write dataset '" + path + "'");
}

void write_tensor(hid_t loc, const std::string& path, const Tensor& t, WriteProps& props) {
  std::vector<hsize_t> dims(t.shape().begin(), t.shape().end());
  write_dataset(loc, path, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims, t.data(), t.empty(), props);
}

// Names become HDF5 paths: no empty, "." or ".." components (and no '/' where `allow_slash`
// is false, e.g. layer names).
void check_name(const std::string& name, const std::string& kind, bool allow_slash) {
  bool bad = name.empty() || (!allow_slash && name.find('/') != std::string::npos);
  std::size_t start = 0;
  while (!bad) {
    std::size_t slash = name.find('/', start);
    std::string part = name.substr(start, slash == std::string::npos ? slash : slash - start);
    bad = part.empty() || part == "." || part == "..";
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (bad) throw std::runtime_error("invalid " + kind + " name '" + name + "'");
}

void check_unique(std::set<std::string>& seen, const std::string& name, const std::string& kind) {
  if (!seen.insert(name).second)
    throw std::runtime_error("duplicate " + kind + " name '" + name + "'");
}

void validate(const CheckpointData& data) {
  std::set<std::string> layers;
  for (const auto& layer : data.layers) {
    check_name(layer.layer, "layer", false);
    check_unique(layers, layer.layer, "layer");
    std::set<std::string> weights;
    for (const auto& w : layer.weights) {
      check_name(w.name, "weight", true);
      check_unique(weights, w.name, "weight (in layer '" + layer.layer + "')");
    }
  }
  if (!data.training) return;
  std::set<std::string> slots;
  for (const auto& slot : data.training->optimizer_slots) {
    check_name(slot.name, "optimizer slot", true);
    check_unique(slots, slot.name, "optimizer slot");
  }
  for (const auto& [name, state] : data.training->rng_states) check_name(name, "RNG state", true);
}

void write_training(hid_t root, const TrainingStateData& training, WriteProps& props) {
  H5Handle tandem = create_group(root, "tandem", props);
  write_int_attr(tandem.get(), "format_version", kCheckpointFormatVersion);
  std::string state = training.state.dump(-1, ' ', true);
  write_dataset(tandem.get(), "state", H5T_STD_U8LE, H5T_NATIVE_UINT8, {state.size()}, state.data(),
                state.empty(), props);

  H5Handle optimizer = create_group(tandem.get(), "optimizer", props);
  std::vector<std::string> slot_names;
  for (const auto& slot : training.optimizer_slots) slot_names.push_back(slot.name);
  write_name_list(optimizer.get(), "slot_names", slot_names);
  for (const auto& slot : training.optimizer_slots)
    write_tensor(optimizer.get(), slot.name, slot.value, props);

  H5Handle rng = create_group(tandem.get(), "rng", props);
  std::vector<std::string> rng_names;
  for (const auto& [name, words] : training.rng_states) rng_names.push_back(name);
  write_name_list(rng.get(), "names", rng_names);
  for (const auto& [name, words] : training.rng_states)
    write_dataset(rng.get(), name, H5T_STD_U64LE, H5T_NATIVE_UINT64, {words.size()}, words.data(),
                  words.empty(), props);
}

// A whole HDF5 file, built in memory: the first `size` bytes of a malloc'd buffer.
struct FreeBytes {
  void operator()(char* p) const { std::free(p); }
};
struct FileImage {
  std::unique_ptr<char, FreeBytes> bytes;
  std::size_t size = 0;
};

// Roughly the bytes the file will need (tensor data plus a margin for metadata).
std::size_t estimated_size(const CheckpointData& data) {
  std::size_t bytes = std::size_t{1} << 20;
  for (const auto& layer : data.layers)
    for (const auto& w : layer.weights) bytes += w.value.size() * sizeof(float) + 1024;
  if (data.training) {
    for (const auto& slot : data.training->optimizer_slots)
      bytes += slot.value.size() * sizeof(float) + 1024;
    for (const auto& [name, words] : data.training->rng_states) bytes += words.size() * 8 + 1024;
  }
  return bytes;
}

// The core driver's buffer, taken over when the file closes instead of freed (HDF5's file image
// callbacks), so the finished file is written to disk from it: no copy of the whole file
// (H5Fget_file_image's) and half the memory at the peak. `capacity` is the buffer's size (the
// file's size rounded up to the driver's increment). The driver makes its buffer with realloc
// (core_malloc serves only file images opened from memory), in ordinary pages: a huge-page
// block saved a 384 MB checkpoint in 550 ms instead of 640 once warm, but its first save in a
// process took 0.9-2.2 s instead of 0.6-1.5 while the kernel assembled the huge pages.
struct CoreBuffer {
  std::unique_ptr<char, FreeBytes> kept;  // set by the close
  std::size_t capacity = 0;
};

void* core_malloc(std::size_t size, H5FD_file_image_op_t, void* udata) {
  void* p = allocate_huge_page_block(size);
  if (p) static_cast<CoreBuffer*>(udata)->capacity = size;
  return p;
}

void* core_memcpy(void* dest, const void* src, std::size_t size, H5FD_file_image_op_t, void*) {
  return std::memcpy(dest, src, size);
}

void* core_realloc(void* ptr, std::size_t size, H5FD_file_image_op_t, void* udata) {
  void* p = std::realloc(ptr, size);
  if (p) static_cast<CoreBuffer*>(udata)->capacity = size;
  return p;
}

herr_t core_free(void* ptr, H5FD_file_image_op_t op, void* udata) {
  auto* buffer = static_cast<CoreBuffer*>(udata);
  if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE && !buffer->kept)
    buffer->kept.reset(static_cast<char*>(ptr));
  else
    std::free(ptr);
  return 0;
}

// One CoreBuffer, outliving the file, shared by the property lists' copies.
void* core_udata_copy(void* udata) {
  return udata;
}
herr_t core_udata_free(void*) {
  return 0;
}

// The file's size as its closed superblock states it (version 2 or 3, which the V18 format
// bounds give: the end-of-file address after the signature, 4 bytes and two addresses).
std::size_t closed_file_size(const CoreBuffer& buffer) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(buffer.kept.get());
  static constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (!bytes || buffer.capacity < 12 || std::memcmp(bytes, kSignature, 8) != 0 || bytes[8] < 2 ||
      bytes[8] > 3 || bytes[9] != 8)
    fail("the file in memory has no version 2 superblock");
  const std::size_t at = 12 + 2 * 8;
  if (buffer.capacity < at + 8) fail("the file in memory is cut short");
  std::uint64_t end = 0;
  for (int i = 7; i >= 0; --i) end = end << 8 | bytes[at + static_cast<std::size_t>(i)];
  if (end > buffer.capacity) fail("the file in memory ends beyond its buffer");
  return static_cast<std::size_t>(end);
}

// Builds the file with HDF5's in-memory (core) driver. HDF5 then never touches the disk: a
// write error inside H5Fclose leaves HDF5 1.10 with a half-closed file that crashes the
// process at exit, so all disk I/O is done by write_file_atomically (tandem/atomic_file.hpp).
// Returns the driver's buffer as the close left it (CoreBuffer).
FileImage build_image(const CheckpointData& data) {
  H5Handle fapl = handle(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "cannot create property list");
  checked(H5Pset_fapl_core(fapl.get(), estimated_size(data), false), "cannot set the core driver");
  CoreBuffer buffer;
  H5FD_file_image_callbacks_t callbacks{&core_malloc, &core_memcpy,     &core_realloc,
                                        &core_free,   &core_udata_copy, &core_udata_free,
                                        &buffer};
  checked(H5Pset_file_image_callbacks(fapl.get(), &callbacks), "cannot set the core driver");
  // v1.8 object headers: readable by every HDF5 >= 1.8 (h5py, Keras), and attributes larger than
  // 64 KiB (a big model_config) go to dense storage instead of failing.
  checked(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18),
          "cannot set file format bounds");
  H5Handle fcpl = handle(H5Pcreate(H5P_FILE_CREATE), H5Pclose, "cannot create property list");
  checked(H5Pset_obj_track_times(fcpl.get(), false), "cannot set file properties");

  H5Handle file =
      handle(H5Fcreate("tandem-checkpoint-image", H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose,
             "cannot create the file in memory");
  {
    WriteProps props;
    hid_t root = file.get();
    const std::string keras_version = data.model_config.is_object() &&
                                              data.model_config.contains("keras_version") &&
                                              data.model_config["keras_version"].is_string()
                                          ? data.model_config["keras_version"].get<std::string>()
                                          : kOwnKerasVersion;
    write_string_attr(root, "keras_version", keras_version);
    write_string_attr(root, "backend", kBackend);
    if (!data.model_config.is_null())
      write_string_attr(root, "model_config", data.model_config.dump(-1, ' ', true));
    if (!data.training_config.is_null())
      write_string_attr(root, "training_config", data.training_config.dump(-1, ' ', true));

    H5Handle weights = create_group(root, "model_weights", props);
    std::vector<std::string> layer_names;
    for (const auto& layer : data.layers) layer_names.push_back(layer.layer);
    write_name_list(weights.get(), "layer_names", layer_names);
    write_string_attr(weights.get(), "backend", kBackend);
    write_string_attr(weights.get(), "keras_version", keras_version);
    for (const auto& layer : data.layers) {
      H5Handle group = create_group(weights.get(), layer.layer, props);
      std::vector<std::string> weight_names;
      for (const auto& w : layer.weights) weight_names.push_back(layer.layer + "/" + w.name + ":0");
      write_name_list(group.get(), "weight_names", weight_names);
      for (std::size_t i = 0; i < layer.weights.size(); ++i)
        write_tensor(group.get(), weight_names[i], layer.weights[i].value, props);
    }
    if (data.training) write_training(root, *data.training, props);
  }
  checked(file.close(), "cannot close the file");
  fapl.close();  // the property list's callbacks refer to `buffer`
  const std::size_t size = closed_file_size(buffer);
  return {std::move(buffer.kept), size};
}

nlohmann::json parse_json(const std::string& text, const std::string& where) {
  try {
    return parse_json_text(text);
  } catch (const JsonTextRefused& e) {
    throw std::runtime_error(where + " is " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(where + " is not valid JSON: " + e.what());
  }
}

// "dense/kernel:0" in layer "dense" → "kernel" (also accepts Keras 3's "dense/kernel").
std::string plain_weight_name(const std::string& layer, std::string name) {
  if (name.size() > layer.size() + 1 && name.compare(0, layer.size() + 1, layer + "/") == 0)
    name.erase(0, layer.size() + 1);
  std::size_t colon = name.rfind(':');
  if (colon != std::string::npos && colon + 1 < name.size() &&
      name.find_first_not_of("0123456789", colon + 1) == std::string::npos)
    name.erase(colon);
  return name;
}

TrainingStateData read_training(hid_t tandem) {
  TrainingStateData training;
  training.state = parse_json(read_text_dataset(tandem, "state", "/tandem/state"), "/tandem/state");
  if (!training.state.is_object())
    throw std::runtime_error("/tandem/state is a JSON " + std::string(training.state.type_name()) +
                             ", not an object");
  if (link_exists(tandem, "optimizer")) {
    H5Handle optimizer = open_group(tandem, "optimizer", "/tandem/optimizer");
    for (const auto& name :
         read_name_list(optimizer.get(), "slot_names").value_or(std::vector<std::string>{}))
      training.optimizer_slots.push_back(
          NamedTensor{name, read_tensor(optimizer.get(), name, "/tandem/optimizer/" + name)});
  }
  if (link_exists(tandem, "rng")) {
    H5Handle rng = open_group(tandem, "rng", "/tandem/rng");
    for (const auto& name : read_name_list(rng.get(), "names").value_or(std::vector<std::string>{}))
      training.rng_states[name] = read_u64(rng.get(), name, "/tandem/rng/" + name);
  }
  return training;
}

// What to read besides the configs.
enum class Parts { configs, everything };

CheckpointData read_contents(hid_t root, Parts parts, WeightBudget budget) {
  CheckpointData data;
  // The version first: a newer format may lay out anything else differently.
  H5Handle tandem;
  if (link_exists(root, "tandem")) {
    tandem = open_group(root, "tandem", "/tandem");
    if (!attr_exists(tandem.get(), "format_version"))
      throw std::runtime_error("/tandem has no 'format_version' attribute");
    long long version = read_int_attr(tandem.get(), "format_version");
    if (version > kCheckpointFormatVersion)
      throw std::runtime_error("written by a newer Tandem; format " + std::to_string(version) +
                               ", this build reads ≤ " + std::to_string(kCheckpointFormatVersion));
    if (version < 1) throw std::runtime_error("invalid format_version " + std::to_string(version));
  }

  // Like Keras's load_weights: the root's layer_names (a weights-only file), else model_weights.
  hid_t weights_loc = root;
  std::string prefix = "/";
  H5Handle model_weights;
  auto layer_names = read_name_list(root, "layer_names");
  if (!layer_names && has_keras3_weights_layout(root)) {
    data.layout = WeightsLayout::keras3;
    if (parts == Parts::everything) data.layers = read_keras3_layers(root, budget);
    return data;
  }
  if (!layer_names) {
    if (!link_exists(root, "model_weights")) {
      throw std::runtime_error(
          "not a Keras/Tandem checkpoint (no /model_weights group and no 'layer_names' "
          "attribute at the root)");
    }
    model_weights = open_group(root, "model_weights", "/model_weights");
    layer_names = read_name_list(model_weights.get(), "layer_names");
    if (!layer_names) throw std::runtime_error("/model_weights has no 'layer_names' attribute");
    weights_loc = model_weights.get();
    prefix = "/model_weights/";
  }
  if (attr_exists(root, "model_config"))
    data.model_config = parse_json(read_string_attr(root, "model_config"), "model_config");
  if (attr_exists(root, "keras_version"))
    data.keras_version = read_string_attr(root, "keras_version");
  if (attr_exists(root, "training_config"))
    data.training_config =
        parse_json(read_string_attr(root, "training_config"), "training_config");
  if (parts == Parts::configs) return data;

  // Names unique in their lists (checkpoint-format.md): a name listed again would read its
  // weights again — 600 times one 4 MiB kernel is 2.4 GB from a 49 KB file.
  const auto require_unique = [](const std::vector<std::string>& names, const std::string& list) {
    std::set<std::string> seen;
    for (const auto& n : names)
      if (!seen.insert(n).second)
        throw std::runtime_error(list + " lists '" + n + "' twice (names are unique in it)");
  };
  require_unique(*layer_names, prefix + "layer_names");
  for (const auto& layer : *layer_names) {
    H5Handle group = open_group(weights_loc, layer, prefix + layer);
    LayerWeights lw{layer, {}};
    const std::vector<std::string> weight_names =
        read_name_list(group.get(), "weight_names").value_or(std::vector<std::string>{});
    require_unique(weight_names, prefix + layer + "/weight_names");
    for (const auto& name : weight_names)
      lw.weights.push_back(
          NamedTensor{plain_weight_name(layer, name),
                      read_tensor(group.get(), name, prefix + layer + "/" + name, &budget)});
    data.layers.push_back(std::move(lw));
  }
  if (tandem.valid()) data.training = read_training(tandem.get());
  return data;
}

}  // namespace

void write_checkpoint_file(const fs::path& path, const CheckpointData& data) {
  const std::string failed = "cannot write checkpoint '" + path.string() + "': ";
  if (path.filename().empty()) throw RunError(failed + "the path names no file");
  try {
    validate(data);
  } catch (const std::exception& e) {
    throw RunError(failed + e.what());
  }
  const fs::path folder = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec)
    throw RunError(failed + "cannot create folder '" + folder.string() + "': " + ec.message());

  FileImage image;
  try {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    image = build_image(data);
  } catch (const std::bad_alloc&) {
    throw RunError(failed + "out of memory");
  } catch (const std::exception& e) {
    throw RunError(failed + e.what());
  }
  // Temporary file, fsync, rename, fsync of the folder; RunError naming the path on failure,
  // with the previous file untouched.
  write_file_atomically(path, std::string_view(image.bytes.get(), image.size));
}

namespace {

// Opens the HDF5 file `path` for reading (hdf5_mutex() held).
H5Handle open_hdf5_file(const fs::path& path) {
  H5Handle fapl = handle(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "cannot create property list");
  checked(H5Pset_file_locking(fapl.get(), true, true), "cannot set file locking");
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (id < 0) {
    std::string detail = hdf5_error_text();
    throw std::runtime_error((detail.find("unable to lock") != std::string::npos
                                  ? "the file is locked by another process"
                                  : "the file is truncated or corrupt") +
                             std::string(" (HDF5: ") + detail + ")");
  }
  return H5Handle(id, H5Fclose);
}

// A Keras 3 .keras archive: its config.json's compile_config is the training config.
CheckpointData read_archive(const fs::path& path, Parts parts, WeightBudget budget) {
  KerasArchive archive = read_keras_archive(path, parts == Parts::everything);
  CheckpointData data;
  if (parts == Parts::everything) {
    const std::string failed = "cannot read checkpoint '" + path.string() + "': ";
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    try {
      hdf5::FileImage image{archive.weights.data(), archive.weights.size()};
      H5Handle file = hdf5::open_file_image(image, "its model.weights.h5");
      data = read_contents(file.get(), Parts::everything, budget);
    } catch (const std::bad_alloc&) {
      throw DataError(failed + "the file is corrupt (a dataset too large to load)");
    } catch (const std::exception& e) {
      throw DataError(failed + e.what());
    }
  }
  data.model_config = std::move(archive.config);
  if (auto it = data.model_config.find("compile_config"); it != data.model_config.end()) {
    data.training_config = std::move(*it);
    data.model_config.erase(it);
  }
  data.keras_version = archive.keras_version;
  data.layout = WeightsLayout::keras3;
  return data;
}

CheckpointData read_file(const fs::path& path, Parts parts, WeightBudget budget) {
  const std::string failed = "cannot read checkpoint '" + path.string() + "': ";
  if (is_keras_archive(path)) return read_archive(path, parts, budget);
  if (const std::string why = not_a_regular_file(path); !why.empty())
    throw DataError(failed + (why == "file not found" ? "no such file" : "it " + why));

  std::lock_guard<std::mutex> lock(hdf5_mutex());
  htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 < 0) {
    std::string detail = hdf5_error_text();
    throw DataError(failed + "cannot open the file" +
                    (detail.empty() ? "" : " (HDF5: " + detail + ")"));
  }
  if (is_hdf5 == 0) throw DataError(failed + "not an HDF5 file");
  try {
    H5Handle file = open_hdf5_file(path);
    return read_contents(file.get(), parts, budget);
  } catch (const std::bad_alloc&) {
    throw DataError(failed + "the file is corrupt (a dataset too large to load)");
  } catch (const std::exception& e) {
    throw DataError(failed + e.what());
  }
}

}  // namespace

CheckpointData read_checkpoint_file(const fs::path& path) {
  return read_file(path, Parts::everything, {});
}

CheckpointData read_checkpoint_file(const fs::path& path, std::int64_t max_weight_values) {
  return read_file(path, Parts::everything, {max_weight_values, max_weight_values});
}

CheckpointData read_checkpoint_configs(const fs::path& path) {
  return read_file(path, Parts::configs, {});
}

namespace {

struct VerifyWalk {
  CheckpointVerification counts;
  std::string error;  // the first damaged dataset
};

herr_t verify_object(hid_t loc, const char* name, const H5O_info_t* info, void* data) {
  auto& walk = *static_cast<VerifyWalk*>(data);
  if (info->type != H5O_TYPE_DATASET || !walk.error.empty()) return 0;
  ++walk.counts.datasets;
  try {
    H5Handle dataset = handle(H5Dopen2(loc, name, local_dataset_access()), H5Dclose,
                              std::string("cannot open dataset '") + name + "'");
    require_own_storage(dataset.get(), name);
    if (!has_checksum(dataset.get())) return 0;
    ++walk.counts.checksummed;
    H5Handle type = handle(H5Dget_type(dataset.get()), H5Tclose, "cannot read a dataset type");
    H5Handle native = handle(H5Tget_native_type(type.get(), H5T_DIR_ASCEND), H5Tclose,
                             "cannot read a dataset type");
    H5Handle space = handle(H5Dget_space(dataset.get()), H5Sclose, "cannot read a dataset shape");
    const hssize_t count = H5Sget_simple_extent_npoints(space.get());
    require_written(dataset.get(), name);
    std::vector<unsigned char> buffer(static_cast<std::size_t>(count) * H5Tget_size(native.get()));
    read_all(dataset.get(), native.get(), buffer.data(), name);
  } catch (const std::exception& e) {
    walk.error = e.what();
  }
  return 0;
}

}  // namespace

CheckpointVerification verify_checkpoint_file(const fs::path& path) {
  // The layout, the weights and the state, as a load reads them.
  const CheckpointData data = read_checkpoint_file(path);
  if (is_keras_archive(path)) {  // its members' CRCs checked as they were read; no HDF5 checksums
    CheckpointVerification counts;
    for (const LayerWeights& layer : data.layers) counts.datasets += layer.weights.size();
    return counts;
  }
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  VerifyWalk walk;
  try {
    H5Handle file = handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose,
                           "cannot open the file");
    checked(H5Ovisit2(file.get(), H5_INDEX_NAME, H5_ITER_NATIVE, verify_object, &walk,
                      H5O_INFO_BASIC),
            "cannot walk the file");
  } catch (const std::exception& e) {
    throw DataError("cannot verify checkpoint '" + path.string() + "': " + e.what());
  }
  if (!walk.error.empty())
    throw DataError("checkpoint '" + path.string() + "': " + walk.error);
  return walk.counts;
}

}  // namespace tandem
