#include "io/hdf5_access.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "io/hdf5_links.hpp"
#include "io/hdf5_storage.hpp"

namespace tandem::hdf5 {

[[noreturn]] void fail(const std::string& what) {
  std::string detail = hdf5_error_text();
  throw std::runtime_error(detail.empty() ? what : what + " (HDF5: " + detail + ")");
}

hid_t checked_id(hid_t id, const std::string& what) {
  if (id < 0) fail(what);
  return id;
}

void checked(herr_t status, const std::string& what) {
  if (status < 0) fail(what);
}

H5Handle handle(hid_t id, H5Handle::Closer closer, const std::string& what) {
  return H5Handle(checked_id(id, what), closer);
}

// Fails naming `where` when the lookup just failed crossed an external link: a checkpoint holds
// its own objects, and the other file may be any file (io/hdf5_links.hpp).
void refuse_crossed_external_link(const std::string& where) {
  if (const std::string target = take_refused_external_link(); !target.empty())
    throw std::runtime_error("'" + where + "' leads through an external link to '" + target +
                             "', which Tandem does not follow: a checkpoint holds its own "
                             "weights");
}

bool link_exists(hid_t loc, const std::string& name) {
  if (name.empty()) throw std::runtime_error("an empty name where a group or dataset is named");
  take_refused_external_link();
  htri_t exists = H5Lexists(loc, name.c_str(), local_link_access());
  if (exists < 0) {
    refuse_crossed_external_link(name);
    fail("cannot look up '" + name + "'");
  }
  return exists > 0;
}

bool attr_exists(hid_t obj, const std::string& name) {
  htri_t exists = H5Aexists(obj, name.c_str());
  if (exists < 0) fail("cannot look up attribute '" + name + "'");
  return exists > 0;
}

namespace {

// Every string of a string attribute (scalar or 1-D; fixed-length or variable-length).
std::vector<std::string> read_strings(hid_t attr, const std::string& name) {
  H5Handle space = handle(H5Aget_space(attr), H5Sclose, "cannot read the shape of '" + name + "'");
  hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (points < 0) fail("cannot read the shape of '" + name + "'");
  std::vector<std::string> out;
  // Any empty array counts: Keras writes `attrs[name] = []`, which h5py stores as float64.
  if (points == 0) return out;
  H5Handle type = handle(H5Aget_type(attr), H5Tclose, "cannot read the type of '" + name + "'");
  if (H5Tget_class(type.get()) != H5T_STRING)
    throw std::runtime_error("attribute '" + name + "' is not a string");
  const auto n = static_cast<std::size_t>(points);
  htri_t variable = H5Tis_variable_str(type.get());
  if (variable < 0) fail("cannot read the type of '" + name + "'");
  if (variable > 0) {
    H5Handle mem = handle(H5Tcopy(H5T_C_S1), H5Tclose, "cannot create string type");
    checked(H5Tset_size(mem.get(), H5T_VARIABLE), "cannot create string type");
    checked(H5Tset_cset(mem.get(), H5Tget_cset(type.get())), "cannot create string type");
    std::vector<char*> pointers(n, nullptr);
    checked(H5Aread(attr, mem.get(), pointers.data()), "cannot read attribute '" + name + "'");
    try {
      for (char* p : pointers) out.emplace_back(p ? p : "");
    } catch (...) {
      H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, pointers.data());
      throw;
    }
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, pointers.data());
    return out;
  }
  const std::size_t size = H5Tget_size(type.get());
  if (size == 0) fail("cannot read the type of '" + name + "'");
  H5Handle mem = handle(H5Tcopy(type.get()), H5Tclose, "cannot create string type");
  std::string buffer(n * size, '\0');
  checked(H5Aread(attr, mem.get(), buffer.data()), "cannot read attribute '" + name + "'");
  const bool space_pad = H5Tget_strpad(type.get()) == H5T_STR_SPACEPAD;
  for (std::size_t i = 0; i < n; ++i) {
    std::string s = buffer.substr(i * size, size);
    s.resize(std::min(s.size(), s.find('\0')));
    if (space_pad) s.erase(s.find_last_not_of(' ') + 1);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<std::string> read_string_attr_values(hid_t obj, const std::string& name) {
  H5Handle attr = handle(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose,
                         "cannot open attribute '" + name + "'");
  return read_strings(attr.get(), name);
}

std::string read_string_attr(hid_t obj, const std::string& name) {
  auto values = read_string_attr_values(obj, name);
  if (values.size() != 1)
    throw std::runtime_error("attribute '" + name + "' holds " + std::to_string(values.size()) +
                             " strings, expected one");
  return values[0];
}

// The path of an open object in its file ("/model_weights/dense"), for messages.
std::string object_path(hid_t obj) {
  const ssize_t size = H5Iget_name(obj, nullptr, 0);
  if (size <= 0) return "?";
  std::string path(static_cast<std::size_t>(size) + 1, '\0');
  H5Iget_name(obj, path.data(), path.size());
  path.resize(static_cast<std::size_t>(size));
  return path;
}

std::optional<std::vector<std::string>> read_name_list(hid_t obj, const std::string& name) {
  try {
    if (attr_exists(obj, name)) return read_string_attr_values(obj, name);
    std::optional<std::vector<std::string>> out;
    for (int chunk = 0; attr_exists(obj, name + std::to_string(chunk)); ++chunk) {
      if (!out) out.emplace();
      auto part = read_string_attr_values(obj, name + std::to_string(chunk));
      out->insert(out->end(), part.begin(), part.end());
    }
    return out;
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(object_path(obj) + ": " + e.what());
  }
}

long long read_int_attr(hid_t obj, const std::string& name) {
  H5Handle attr = handle(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose,
                         "cannot open attribute '" + name + "'");
  H5Handle type = handle(H5Aget_type(attr.get()), H5Tclose, "cannot read '" + name + "'");
  H5Handle space = handle(H5Aget_space(attr.get()), H5Sclose, "cannot read '" + name + "'");
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Sget_simple_extent_npoints(space.get()) != 1)
    throw std::runtime_error("attribute '" + name + "' is not an integer");
  long long value = 0;
  checked(H5Aread(attr.get(), H5T_NATIVE_LLONG, &value), "cannot read attribute '" + name + "'");
  return value;
}

namespace {

// File-image callbacks that hand HDF5 the caller's bytes in place (HDF5 asks to allocate and copy
// the image when it is set on the property list and again when the file opens; for a read-only
// file it never grows it). Nothing is allocated, so a failed open leaks nothing (libhdf5_hl's
// H5LTopen_file_image leaks its callback data then).
void* image_in_place(std::size_t size, H5FD_file_image_op_t, void* udata) {
  auto* image = static_cast<FileImage*>(udata);
  return size == image->size ? image->data : nullptr;
}
void* copied_in_place(void* dest, const void*, std::size_t, H5FD_file_image_op_t, void*) {
  return dest;
}
void* never_grown(void*, std::size_t, H5FD_file_image_op_t, void*) {
  return nullptr;
}
herr_t kept(void*, H5FD_file_image_op_t, void*) {
  return 0;
}
void* same_udata(void* udata) {
  return udata;
}
herr_t udata_kept(void*) {
  return 0;
}

}  // namespace

H5Handle open_file_image(FileImage& image, const std::string& name) {
  H5Handle fapl = handle(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "cannot create property list");
  checked(H5Pset_fapl_core(fapl.get(), 1 << 16, false), "cannot set the in-memory driver");
  H5FD_file_image_callbacks_t callbacks{image_in_place, copied_in_place, never_grown, kept,
                                        same_udata,     udata_kept,      &image};
  checked(H5Pset_file_image_callbacks(fapl.get(), &callbacks), "cannot set file image callbacks");
  checked(H5Pset_file_image(fapl.get(), image.data, image.size), "cannot set the file image");
  const hid_t id = H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (id < 0) fail(name + " is not an HDF5 file, or is truncated or corrupt");
  return H5Handle(id, H5Fclose);
}

H5Handle open_group(hid_t loc, const std::string& name, const std::string& where) {
  if (!link_exists(loc, name)) throw std::runtime_error("missing group '" + where + "'");
  const hid_t group = H5Gopen2(loc, name.c_str(), local_group_access());
  if (group < 0) refuse_crossed_external_link(where);
  return handle(group, H5Gclose, "cannot open group '" + where + "'");
}

std::vector<GroupMember> group_members(hid_t group, const std::string& where) {
  H5G_info_t info{};
  checked(H5Gget_info(group, &info), "cannot list group '" + where + "'");
  std::vector<GroupMember> members;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size =
        H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (size < 0) fail("cannot list group '" + where + "'");
    std::string name(static_cast<std::size_t>(size) + 1, '\0');
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                       H5P_DEFAULT);
    name.resize(static_cast<std::size_t>(size));
    const std::string path = where + (where.ends_with('/') ? "" : "/") + name;
    take_refused_external_link();
    H5O_info_t object{};
    if (H5Oget_info_by_name2(group, name.c_str(), &object, H5O_INFO_BASIC, local_link_access()) <
        0) {
      refuse_crossed_external_link(path);
      fail("cannot look up '" + path + "'");
    }
    if (object.type != H5O_TYPE_GROUP && object.type != H5O_TYPE_DATASET)
      throw std::runtime_error("'" + path + "' is neither a group nor a dataset");
    members.push_back({std::move(name), object.type == H5O_TYPE_GROUP});
  }
  return members;
}

// A checkpoint's values are in the file itself: external storage or a virtual dataset may read
// any file (a FIFO blocks the read, /dev/zero fills any size), and what is missing there reads as
// the fill value.
void require_own_storage(hid_t dataset, const std::string& where) {
  if (const std::string borrowed = borrowed_storage(dataset); !borrowed.empty())
    throw std::runtime_error("dataset '" + where + "' is " + borrowed +
                             ", which may be any file: a checkpoint holds its own weights");
}

// Whether `dataset` carries HDF5's Fletcher32 checksum.
bool has_checksum(hid_t dataset) {
  H5Handle dcpl = handle(H5Dget_create_plist(dataset), H5Pclose, "cannot read dataset properties");
  unsigned flags = 0;
  std::size_t n = 0;
  unsigned config = 0;
  return H5Pget_filter_by_id2(dcpl.get(), H5Z_FILTER_FLETCHER32, &flags, &n, nullptr, 0, nullptr,
                              &config) >= 0;
}

namespace {

// Why reading `dataset` failed: its checksum, when it has one (HDF5 checks it on every read).
std::string read_failure(hid_t dataset, const std::string& where) {
  if (has_checksum(dataset))
    return "dataset '" + where +
           "' fails its Fletcher32 checksum (or cannot be read): the file is damaged";
  return "cannot read dataset '" + where + "'";
}

}  // namespace

// Refuses `dataset` when not all of it was ever written: damage, not values. Called before a
// reader allocates what the header declares (42 KB of file may declare 3 GiB never written).
void require_written(hid_t dataset, const std::string& where) {
  if (const std::string unwritten = unwritten_storage(dataset, true); !unwritten.empty())
    fail("dataset '" + where + "' cannot be read whole: " + unwritten +
         "; the file is damaged or was never finished (the missing values would read as the "
         "fill value)");
}

// Reads all of `dataset` (require_written() passed) as `mem_type` into `out`; on failure names
// the dataset (and its checksum, asked only then).
void read_all(hid_t dataset, hid_t mem_type, void* out, const std::string& where) {
  if (H5Dread(dataset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
    fail(read_failure(dataset, where));
}

DatasetInfo open_dataset(hid_t loc, const std::string& path, const std::string& where) {
  if (path.empty()) throw std::runtime_error("dataset '" + where + "': an empty name");
  // Check each step so a missing link is reported as such, not as an HDF5 failure.
  for (std::size_t slash = path.find('/');; slash = path.find('/', slash + 1)) {
    if (!link_exists(loc, path.substr(0, slash)))
      throw std::runtime_error("missing dataset '" + where + "'");
    if (slash == std::string::npos) break;
  }
  DatasetInfo info;
  const hid_t dataset = H5Dopen2(loc, path.c_str(), local_dataset_access());
  if (dataset < 0) refuse_crossed_external_link(where);
  info.dataset = handle(dataset, H5Dclose, "cannot open dataset '" + where + "'");
  require_own_storage(info.dataset.get(), where);
  info.type = handle(H5Dget_type(info.dataset.get()), H5Tclose, "cannot read '" + where + "'");
  H5Handle space =
      handle(H5Dget_space(info.dataset.get()), H5Sclose, "cannot read '" + where + "'");
  H5S_class_t kind = H5Sget_simple_extent_type(space.get());
  if (kind == H5S_NULL) {
    info.dims = {0};
  } else if (kind == H5S_SIMPLE) {
    int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0) fail("cannot read the shape of '" + where + "'");
    info.dims.resize(static_cast<std::size_t>(rank));
    checked(H5Sget_simple_extent_dims(space.get(), info.dims.data(), nullptr),
            "cannot read the shape of '" + where + "'");
  } else if (kind != H5S_SCALAR) {
    fail("cannot read the shape of '" + where + "'");
  }
  constexpr auto kMax = static_cast<hsize_t>(std::numeric_limits<std::int64_t>::max() / 8);
  hsize_t count = 1;
  for (hsize_t d : info.dims) {
    if (d > kMax || (d != 0 && count > kMax / d))
      throw std::runtime_error("dataset '" + where + "' has an impossible shape");
    count *= d;
  }
  info.count = static_cast<std::size_t>(count);
  require_written(info.dataset.get(), where);  // before any reader allocates info.count values
  return info;
}

void WeightBudget::spend(const DatasetInfo& info, const std::string& where) {
  if (bound < 0) return;
  left -= static_cast<std::int64_t>(std::min<std::size_t>(info.count, std::size_t{1} << 62));
  if (left >= 0) return;
  std::string shape;
  for (const hsize_t d : info.dims) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  throw std::runtime_error("dataset '" + where + "' (shape (" + shape +
                           ")) takes the file's weights past the " + std::to_string(bound) +
                           " values of the model they are read for: not its weights");
}

namespace {

// Keras 3 stores a bfloat16 variable as its 16-bit patterns (an opaque numpy type to h5py) with
// attribute dtype="bfloat16".
bool stored_as_bfloat16(hid_t dataset) {
  if (!attr_exists(dataset, "dtype")) return false;
  const std::vector<std::string> dtype = read_string_attr_values(dataset, "dtype");
  return dtype.size() == 1 && dtype[0] == "bfloat16";
}

// The bfloat16 patterns of `info` into `out`, widened (exactly: a bfloat16 is a float32's upper
// half).
void read_bfloat16(const DatasetInfo& info, float* out, const std::string& where) {
  const H5T_class_t kind = H5Tget_class(info.type.get());
  if ((kind != H5T_OPAQUE && kind != H5T_INTEGER) || H5Tget_size(info.type.get()) != 2)
    throw std::runtime_error("dataset '" + where +
                             "' says dtype bfloat16 but does not hold 16-bit values");
  std::vector<std::uint16_t> bits(info.count);
  H5Handle mem = handle(H5Tcopy(info.type.get()), H5Tclose, "cannot copy a dataset type");
  read_all(info.dataset.get(), mem.get(), bits.data(), where);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const std::uint32_t word = std::uint32_t{bits[i]} << 16;
    std::memcpy(out + i, &word, sizeof word);
  }
}

}  // namespace

Tensor read_tensor(hid_t loc, const std::string& path, const std::string& where,
                   WeightBudget* budget) {
  DatasetInfo info = open_dataset(loc, path, where);
  const bool bfloat16 = stored_as_bfloat16(info.dataset.get());
  H5T_class_t kind = H5Tget_class(info.type.get());
  if (kind != H5T_FLOAT && kind != H5T_INTEGER && !bfloat16)
    throw std::runtime_error("dataset '" + where + "' is not numeric");
  if (budget) budget->spend(info, where);
  Tensor t(Shape(info.dims.begin(), info.dims.end()));
  if (t.empty()) return t;
  if (bfloat16)
    read_bfloat16(info, t.data(), where);
  else
    read_all(info.dataset.get(), H5T_NATIVE_FLOAT, t.data(), where);
  return t;
}

std::vector<std::uint64_t> read_u64(hid_t loc, const std::string& path, const std::string& where) {
  DatasetInfo info = open_dataset(loc, path, where);
  if (H5Tget_class(info.type.get()) != H5T_INTEGER || info.dims.size() != 1)
    throw std::runtime_error("dataset '" + where + "' is not a 1-D integer array");
  std::vector<std::uint64_t> words(info.count);
  if (!words.empty()) read_all(info.dataset.get(), H5T_NATIVE_UINT64, words.data(), where);
  return words;
}

// The JSON text of /tandem/state: a uint8 array (as written) or a string dataset.
std::string read_text_dataset(hid_t loc, const std::string& path, const std::string& where) {
  DatasetInfo info = open_dataset(loc, path, where);
  H5T_class_t kind = H5Tget_class(info.type.get());
  if (kind == H5T_INTEGER && info.dims.size() == 1) {
    std::string text(info.count, '\0');
    if (!text.empty()) read_all(info.dataset.get(), H5T_NATIVE_UINT8, text.data(), where);
    return text;
  }
  if (kind == H5T_STRING && info.count == 1) {
    htri_t variable = H5Tis_variable_str(info.type.get());
    if (variable < 0) fail("cannot read the type of '" + where + "'");
    if (variable > 0) {
      H5Handle mem = handle(H5Tcopy(H5T_C_S1), H5Tclose, "cannot create string type");
      checked(H5Tset_size(mem.get(), H5T_VARIABLE), "cannot create string type");
      char* p = nullptr;
      checked(H5Dread(info.dataset.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p),
              "cannot read dataset '" + where + "'");
      std::string text = p ? p : "";
      H5free_memory(p);
      return text;
    }
    std::string text(H5Tget_size(info.type.get()), '\0');
    H5Handle mem = handle(H5Tcopy(info.type.get()), H5Tclose, "cannot create string type");
    checked(H5Dread(info.dataset.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()),
            "cannot read dataset '" + where + "'");
    text.resize(std::min(text.size(), text.find('\0')));
    return text;
  }
  throw std::runtime_error("dataset '" + where + "' is not a JSON text");
}

}  // namespace tandem::hdf5
