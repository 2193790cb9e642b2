// Error-checked HDF5 calls and the reading of attributes, groups and datasets, as checkpoint
// files (tandem/checkpoint_file.hpp) and Keras 3 weights files (io/keras3_weights.hpp) need them.
// Failures are std::runtime_error saying what failed, with HDF5's own message where it has one;
// callers wrap them with the file's path. Nothing here follows an external link to another file
// (io/hdf5_links.hpp) or reads values stored outside the file (io/hdf5_storage.hpp).
//
// Use only while holding hdf5_mutex() (io/hdf5_lock.hpp). Identifiers passed in are borrowed;
// H5Handles returned are the caller's to keep.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/hdf5_handle.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::hdf5 {

/// Throws std::runtime_error: `what`, and HDF5's message when its error stack holds one.
[[noreturn]] void fail(const std::string& what);
/// `id`, or fail(what) when it is negative.
hid_t checked_id(hid_t id, const std::string& what);
/// fail(what) when `status` is negative.
void checked(herr_t status, const std::string& what);
/// Owns `id` (fail(what) when negative), closed with `closer`.
H5Handle handle(hid_t id, H5Handle::Closer closer, const std::string& what);

/// Fails naming `where` when the lookup that just failed crossed an external link.
void refuse_crossed_external_link(const std::string& where);
/// Whether `name` (a path relative to `loc`) names a link; never follows an external one.
bool link_exists(hid_t loc, const std::string& name);
bool attr_exists(hid_t obj, const std::string& name);

/// The path of an open object in its file ("/model_weights/dense"), for messages.
std::string object_path(hid_t obj);

/// Every string of a string attribute (scalar or 1-D; fixed- or variable-length).
std::vector<std::string> read_string_attr_values(hid_t obj, const std::string& name);
/// The one string of a string attribute.
std::string read_string_attr(hid_t obj, const std::string& name);
/// Keras' load_attributes_from_hdf5_group: attribute `name`, or its chunks name0, name1, ...;
/// nullopt when absent.
std::optional<std::vector<std::string>> read_name_list(hid_t obj, const std::string& name);
long long read_int_attr(hid_t obj, const std::string& name);

/// An HDF5 file held in memory, to be opened in place: read-only, nothing copied. The bytes and
/// this view must outlive the file opened on them.
struct FileImage {
  void* data = nullptr;
  std::size_t size = 0;
};
/// Opens `image` read-only; `name` names it in HDF5's messages. fail() when it is not an HDF5
/// file, or is truncated or corrupt.
H5Handle open_file_image(FileImage& image, const std::string& name);

/// Opens group `name` under `loc`; `where` names it in messages ("missing group '/x'").
H5Handle open_group(hid_t loc, const std::string& name, const std::string& where);

/// The members of a group (links to groups and datasets, in name order) and what each is.
struct GroupMember {
  std::string name;
  bool is_group = false;  // else a dataset
};
std::vector<GroupMember> group_members(hid_t group, const std::string& where);

/// An open dataset and its shape, checked to hold its own values (no external or virtual
/// storage) and to have been written whole.
struct DatasetInfo {
  H5Handle dataset;
  H5Handle type;
  std::vector<hsize_t> dims;  // empty for a scalar
  std::size_t count = 1;
};
DatasetInfo open_dataset(hid_t loc, const std::string& path, const std::string& where);

/// Whether `dataset` carries HDF5's Fletcher32 checksum.
bool has_checksum(hid_t dataset);
/// Refuses `dataset` when not all of it was ever written (damage, not values).
void require_written(hid_t dataset, const std::string& where);
/// Refuses `dataset` when its values are stored outside the file.
void require_own_storage(hid_t dataset, const std::string& where);
/// Reads all of `dataset` as `mem_type` into `out`; on failure names it (and its checksum).
void read_all(hid_t dataset, hid_t mem_type, void* out, const std::string& where);

/// The weight values a reader still takes: a file declaring more than `bound` is refused naming
/// the dataset that goes past it, before that dataset is read. bound -1: no bound.
struct WeightBudget {
  std::int64_t bound = -1;
  std::int64_t left = 0;
  void spend(const DatasetInfo& info, const std::string& where);
};

/// A numeric dataset as float32 (a Keras 3 bfloat16 one, stored as its 16-bit patterns with
/// attribute dtype="bfloat16", widened exactly), charged to `budget` when given.
Tensor read_tensor(hid_t loc, const std::string& path, const std::string& where,
                   WeightBudget* budget = nullptr);
/// A 1-D integer dataset as uint64.
std::vector<std::uint64_t> read_u64(hid_t loc, const std::string& path, const std::string& where);
/// A JSON text: a uint8 array or a string dataset.
std::string read_text_dataset(hid_t loc, const std::string& path, const std::string& where);

}  // namespace tandem::hdf5

TANDEM_INTERNAL_API_END
