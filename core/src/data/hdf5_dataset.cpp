// HDF5 datasets: x and y are datasets of any numeric type (converted to float32 by HDF5), samples
// along the first dimension. Small data is loaded whole; large data is read by hyperslabs through
// an LRU cache of contiguous row blocks (chunk-aligned), with scattered rows read directly.
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <list>
#include <mutex>
#include <sstream>
#include <utility>

#include "data/datasets.hpp"
#include "io/hdf5_handle.hpp"
#include "io/hdf5_links.hpp"
#include "io/hdf5_lock.hpp"
#include "io/hdf5_storage.hpp"
#include "tandem/error.hpp"
#include "util/regular_file.hpp"

namespace tandem::data {

namespace {

using Lock = std::lock_guard<std::mutex>;

void quiet_hdf5() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

std::vector<std::string> dataset_names(hid_t file) {
  std::vector<std::string> names;
  H5Ovisit2(
      file, H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
        if (info->type == H5O_TYPE_DATASET)
          static_cast<std::vector<std::string>*>(data)->push_back(name);
        return 0;
      },
      &names, H5O_INFO_BASIC);
  H5Eclear2(H5E_DEFAULT);
  return names;
}

// Why `name` opens no dataset in `file`, when something is there: a group, a soft link to nothing,
// an external link whose file or object cannot be opened. "" when nothing is there by that name.
std::string not_a_dataset(hid_t file, const std::string& name) {
  // Every group on the way must exist for H5Lexists to be asked about the next one.
  for (std::size_t slash = name.find('/', 1);; slash = name.find('/', slash + 1)) {
    const std::string part = name.substr(0, slash);
    if (H5Lexists(file, part.c_str(), local_link_access()) <= 0) return "";
    if (slash == std::string::npos) break;
  }
  H5L_info_t link{};
  if (H5Lget_info(file, name.c_str(), &link, local_link_access()) < 0) return "";
  if (link.type == H5L_TYPE_SOFT || link.type == H5L_TYPE_EXTERNAL) {
    std::vector<char> target(link.u.val_size + 1, '\0');
    H5Lget_val(file, name.c_str(), target.data(), target.size(), H5P_DEFAULT);
    std::string where = target.data();
    if (link.type == H5L_TYPE_EXTERNAL) {
      const char* ext_file = nullptr;
      const char* ext_path = nullptr;
      unsigned flags = 0;
      if (H5Lunpack_elink_val(target.data(), target.size(), &flags, &ext_file, &ext_path) >= 0)
        where = std::string(ext_file ? ext_file : "?") + ":" + (ext_path ? ext_path : "?");
    }
    if (H5Oexists_by_name(file, name.c_str(), local_link_access()) <= 0)
      return std::string(link.type == H5L_TYPE_SOFT ? "a soft link" : "an external link") +
             " to '" + where + "', which leads to nothing that can be opened";
  }
  H5O_info_t info{};
  if (H5Oget_info_by_name2(file, name.c_str(), &info, H5O_INFO_BASIC, local_link_access()) >= 0 &&
      info.type == H5O_TYPE_GROUP)
    return "a group, not a dataset (name a dataset inside it, e.g. '" + name + "/...')";
  return "";
}

const char* class_name(H5T_class_t c) {
  switch (c) {
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_REFERENCE:
      return "reference";
    case H5T_VLEN:
      return "variable-length";
    case H5T_ARRAY:
      return "array";
    case H5T_TIME:
      return "time";
    default:
      return "unknown";
  }
}

// One HDF5 dataset (x or y) and its geometry.
struct Column {
  std::string name;
  H5Handle dset;
  Shape dims;                   // full dims; dims[0] = samples
  std::int64_t row = 1;         // floats per sample
  std::int64_t chunk_rows = 0;  // first dimension of a chunk, 0 when not chunked

  Shape row_shape() const { return Shape(dims.begin() + 1, dims.end()); }
};

// The columns a sample's x (or y) packs, in order.
struct ColumnGroup {
  std::vector<Column> columns;
  std::int64_t row = 0;  // floats per sample, all columns

  Shape shape() const { return columns.size() == 1 ? columns[0].row_shape() : Shape{row}; }
  std::vector<Shape> parts() const {
    std::vector<Shape> p;
    for (const Column& c : columns) p.push_back(c.row_shape());
    return p;
  }
  void close() {
    for (Column& c : columns) c.dset.close();
  }
};

// A dataset whose storage was never (fully) written declares samples nobody wrote: they would
// read as the fill value, so a 2 KB file could claim two billion samples of zeros.
void refuse_unwritten_storage(const Column& c, const std::string& path) {
  if (c.dims[0] == 0) return;
  const std::string unwritten = unwritten_storage(c.dset.get(), false);
  if (unwritten.empty()) return;
  throw DataError(path + ": dataset '" + c.name + "' declares " + std::to_string(c.dims[0]) +
                  " samples but " + unwritten +
                  "; unwritten samples would read as the fill value. Write every sample, or shrink "
                  "the dataset to the samples written (h5py: dataset.resize(n, axis=0))");
}

// The way to make borrowed values (io/hdf5_storage.hpp, io/hdf5_links.hpp) the file's own.
std::string copy_advice(const std::string& name) {
  return "; copy it into an ordinary dataset first (h5py: out['" + name + "'] = f['" + name +
         "'][()])";
}

// Values kept in other files are refused with the way to make them ordinary.
void refuse_borrowed_storage(const std::string& path, const std::string& name, hid_t dataset) {
  const std::string where = borrowed_storage(dataset);
  if (where.empty()) return;
  throw DataError(path + ": dataset '" + name + "' is " + where +
                  ", which may be any file, and what is missing there would read as the fill "
                  "value unnoticed" +
                  copy_advice(name));
}

Column open_column(hid_t file, const std::string& path, const std::string& name) {
  Column c;
  c.name = name;
  H5Handle dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
  // A larger chunk cache than HDF5's 1 MiB default, for scattered reads of chunked data.
  H5Pset_chunk_cache(dapl.get(), 10007, std::size_t{32} << 20, 1.0);
  refuse_external_links(dapl.get());
  take_refused_external_link();
  c.dset = H5Handle(H5Dopen2(file, name.c_str(), dapl.get()), H5Dclose);
  if (!c.dset.valid()) {
    H5Eclear2(H5E_DEFAULT);
    if (const std::string target = take_refused_external_link(); !target.empty())
      throw DataError(path + ": '" + name + "' leads through an external link to '" + target +
                      "', which Tandem does not follow (it may name any file)" + copy_advice(name));
    const std::string what = not_a_dataset(file, name);
    H5Eclear2(H5E_DEFAULT);
    if (!what.empty()) throw DataError(path + ": '" + name + "' is " + what);
    std::string list;
    for (const auto& n : dataset_names(file)) list += (list.empty() ? "'" : ", '") + n + "'";
    throw DataError(path + ": no dataset '" + name +
                    "' (datasets in the file: " + (list.empty() ? "none" : list) + ")");
  }
  H5Handle type(H5Dget_type(c.dset.get()), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls == H5T_ENUM)  // h5py stores NumPy's bool arrays as an enum of FALSE and TRUE
    throw DataError(path + ": dataset '" + name +
                    "' has an enum type (h5py writes NumPy bool arrays so); expected integers or "
                    "floats: store it as uint8 (h5py: f['" +
                    name + "'] = a.astype(np.uint8))");
  if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    throw DataError(path + ": dataset '" + name + "' has a non-numeric type (" + class_name(cls) +
                    "); expected integers or floats");
  H5Handle space(H5Dget_space(c.dset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 1)
    throw DataError(path + ": dataset '" + name +
                    "' is a scalar; expected samples along its first dimension");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  // Samples of at least one and at most 2^31 - 1 values each, at most 2^62 samples: the sizes the
  // reader computes from them cannot overflow.
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const bool fits =
        i == 0 ? dims[i] <= (hsize_t{1} << 62)
               : dims[i] > 0 && dims[i] <= static_cast<hsize_t>(kMaxConfigSize) &&
                     !__builtin_mul_overflow(c.row, static_cast<std::int64_t>(dims[i]), &c.row) &&
                     c.row <= kMaxConfigSize;
    c.dims.push_back(static_cast<std::int64_t>(std::min<hsize_t>(dims[i], hsize_t{1} << 62)));
    if (!fits) {
      std::string shape;
      for (std::size_t j = 0; j < dims.size(); ++j)
        shape += (j ? ", " : "") + std::to_string(dims[j]);
      throw DataError(path + ": dataset '" + name + "' has the shape (" + shape + "); expected " +
                      (i == 0 ? "at most 2^62 samples"
                              : "samples of 1 to " + std::to_string(kMaxConfigSize) + " values"));
    }
  }
  H5Handle dcpl(H5Dget_create_plist(c.dset.get()), H5Pclose);
  refuse_borrowed_storage(path, name, c.dset.get());
  refuse_unwritten_storage(c, path);
  if (H5Pget_layout(dcpl.get()) == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(static_cast<std::size_t>(rank));
    if (H5Pget_chunk(dcpl.get(), rank, chunk.data()) == rank)
      c.chunk_rows = static_cast<std::int64_t>(chunk[0]);
  }
  return c;
}

class Hdf5Dataset final : public Dataset {
 public:
  Hdf5Dataset(const Hdf5Spec& spec, Hdf5ReadOptions options) : path_(spec.file), options_(options) {
    Lock lock(hdf5_mutex());
    quiet_hdf5();
    try {
      open(spec);
    } catch (...) {
      close_handles();  // while the lock is held
      throw;
    }
    if (stats_.whole) close_handles();  // everything is in memory
  }

  ~Hdf5Dataset() override {
    Lock lock(hdf5_mutex());
    close_handles();
  }

  std::int64_t size() const override { return n_; }
  Shape x_shape() const override { return x_.shape(); }
  Shape y_shape() const override { return y_shape_; }
  std::vector<Shape> x_parts() const override { return x_.parts(); }
  std::vector<Shape> y_parts() const override { return y_parts_; }
  std::int64_t weight_count() const override { return weight_count_; }

  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    for (std::int64_t i : indices)
      if (i < 0 || i >= n_)
        throw DataError(path_ + ": sample " + std::to_string(i) + " out of range (" +
                        std::to_string(n_) + " samples)");
    if (stats_.whole) {
      for (std::size_t k = 0; k < indices.size(); ++k)
        copy_row(x_all_, y_all_, indices[k], k, x, y);
      return;
    }
    Lock lock(hdf5_mutex());
    quiet_hdf5();

    // Rows in cached blocks are copied at once; the others are grouped by block below.
    std::vector<std::pair<std::int64_t, std::size_t>> misses;  // (sample, position in batch)
    for (std::size_t k = 0; k < indices.size(); ++k) {
      if (const Block* b = find_block(indices[k] / stats_.block_rows)) {
        copy_row(b->x, b->y, indices[k] - b->first, k, x, y);
        ++stats_.block_hits;
      } else {
        misses.emplace_back(indices[k], k);
      }
    }
    std::sort(misses.begin(), misses.end());

    std::vector<std::pair<std::int64_t, std::size_t>> direct;
    for (std::size_t g = 0; g < misses.size();) {
      const std::int64_t block = misses[g].first / stats_.block_rows;
      std::size_t end = g;
      while (end < misses.size() && misses[end].first / stats_.block_rows == block) ++end;
      const std::int64_t first = block * stats_.block_rows;
      const std::int64_t rows = std::min(stats_.block_rows, n_ - first);
      // Load the whole block when this batch wants a good part of it or reading is sequential.
      const bool load = static_cast<std::int64_t>(end - g) * 8 >= rows || block == last_block_ ||
                        block == last_block_ + 1;
      if (load) {
        const Block& b = load_block(block);
        for (std::size_t m = g; m < end; ++m)
          copy_row(b.x, b.y, misses[m].first - b.first, misses[m].second, x, y);
      } else {
        direct.insert(direct.end(), misses.begin() + static_cast<std::ptrdiff_t>(g),
                      misses.begin() + static_cast<std::ptrdiff_t>(end));
      }
      g = end;
    }
    read_direct(direct, x, y);
    if (!indices.empty()) last_block_ = indices.back() / stats_.block_rows;
  }

  std::string describe() const override {
    std::string names;
    for (const ColumnGroup* g : {&x_, &y_})
      for (const Column& c : g->columns) names += (names.empty() ? "'" : ", '") + c.name + "'";
    return "hdf5: " + path_ + " [" + names + "] (" + std::to_string(n_) + " samples)";
  }

  Hdf5Stats stats() const {
    Lock lock(hdf5_mutex());
    return stats_;
  }

 private:
  struct Block {
    std::int64_t index = 0;
    std::int64_t first = 0;  // first sample
    std::vector<float> x, y;
  };

  void open(const Hdf5Spec& spec) {
    if (const std::string why = not_a_regular_file(path_); !why.empty())
      throw DataError(path_ + ": " + why);
    const htri_t is_hdf5 = H5Fis_hdf5(path_.c_str());
    if (is_hdf5 == 0) throw DataError(path_ + ": not an HDF5 file");
    if (is_hdf5 < 0) throw DataError(path_ + ": cannot read the file (" + hdf5_error_text() + ")");
    file_ = H5Handle(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file_.valid()) throw DataError(path_ + ": cannot open (" + hdf5_error_text() + ")");

    x_ = open_group(spec.x_names);
    y_ = open_group(spec.y_names);
    y_shape_ = y_.shape();
    y_parts_ = y_.parts();
    if (!spec.weight_name.empty()) add_weights(spec.weight_name);
    const Column& first = x_.columns[0];
    for (const ColumnGroup* g : {&x_, &y_})
      for (const Column& c : g->columns)
        if (c.dims[0] != first.dims[0])
          throw DataError(path_ + ": dataset '" + first.name + "' has " +
                          std::to_string(first.dims[0]) + " samples (first dimension) but '" +
                          c.name + "' has " + std::to_string(c.dims[0]) + "; they must match");
    n_ = first.dims[0];
    if (weight_count_ > 0) check_weights(y_.columns.back());

    const std::int64_t row_bytes = (x_.row + y_.row) * std::int64_t{sizeof(float)};
    if (n_ <= options_.whole_limit_bytes / row_bytes) {
      x_all_.resize(static_cast<std::size_t>(n_ * x_.row));
      y_all_.resize(static_cast<std::size_t>(n_ * y_.row));
      read_rows(x_, 0, n_, x_all_.data());
      read_rows(y_, 0, n_, y_all_.data());
      stats_.whole = true;
    } else {
      std::int64_t rows = std::max<std::int64_t>(1, options_.block_bytes / row_bytes);
      const std::int64_t chunk = first.chunk_rows;
      if (chunk > 0) rows = std::max(chunk, rows / chunk * chunk);
      stats_.block_rows = std::min(rows, std::max<std::int64_t>(n_, 1));
    }
  }

  ColumnGroup open_group(const std::vector<std::string>& names) const {
    ColumnGroup g;
    for (const std::string& name : names) {
      g.columns.push_back(open_column(file_.get(), path_, name));
      g.row += g.columns.back().row;
    }
    return g;
  }

  // The samples' weights become y's last column (Dataset::read puts them after the targets):
  // one per sample ((samples,) or (samples, 1)), or several, one per position of the targets,
  // which the objective checks against the model's output (nn/objective.hpp).
  void add_weights(const std::string& name) {
    Column w = open_column(file_.get(), path_, name);
    if (w.row == 0)
      throw DataError(path_ + ": sample_weight dataset '" + name + "' has samples of shape " +
                      shape_to_string(w.row_shape(), true) +
                      ", which hold no weight; expected one weight per sample (shape (samples,)) "
                      "or one per position of the targets (shape (samples, steps))");
    weight_count_ = w.row;
    y_.row += w.row;
    y_.columns.push_back(std::move(w));
  }

  // Every weight finite and >= 0, checked before training starts (one pass over one column).
  void check_weights(const Column& w) const {
    const std::int64_t block = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / w.row);
    std::vector<float> values;
    for (std::int64_t first = 0; first < n_; first += block) {
      const std::int64_t count = std::min(block, n_ - first);
      values.resize(static_cast<std::size_t>(count * w.row));
      read_rows(w, first, count, values.data());
      for (std::int64_t i = 0; i < count * w.row; ++i) {
        const float v = values[static_cast<std::size_t>(i)];
        if (std::isfinite(v) && v >= 0) continue;
        std::ostringstream text;
        text << v;
        const std::string position =
            w.row > 1 ? " at position " + std::to_string(i % w.row) + " of " + std::to_string(w.row)
                      : "";
        throw DataError(path_ + ": sample_weight dataset '" + w.name + "' gives sample " +
                        std::to_string(first + i / w.row) + " the weight " + text.str() + position +
                        "; expected a finite weight >= 0");
      }
    }
  }

  // Datasets before the file. Callers hold hdf5_mutex().
  void close_handles() {
    x_.close();
    y_.close();
    file_.close();
  }

  void copy_row(const std::vector<float>& xs, const std::vector<float>& ys, std::int64_t row,
                std::size_t k, float* x, float* y) const {
    const auto kk = static_cast<std::int64_t>(k);
    std::memcpy(x + kk * x_.row, xs.data() + row * x_.row,
                static_cast<std::size_t>(x_.row) * sizeof(float));
    if (y_.row > 0)  // data without targets has none (and y may be null)
      std::memcpy(y + kk * y_.row, ys.data() + row * y_.row,
                  static_cast<std::size_t>(y_.row) * sizeof(float));
  }

  // Reads samples [first, first + count) of a group into `out` (count * row floats, packed).
  void read_rows(const ColumnGroup& g, std::int64_t first, std::int64_t count, float* out) const {
    if (g.columns.size() == 1) {
      read_rows(g.columns[0], first, count, out);
      return;
    }
    std::int64_t offset = 0;
    for (const Column& c : g.columns) {
      part_.resize(static_cast<std::size_t>(count * c.row));
      read_rows(c, first, count, part_.data());
      for (std::int64_t r = 0; r < count; ++r)
        std::memcpy(out + r * g.row + offset, part_.data() + r * c.row,
                    static_cast<std::size_t>(c.row) * sizeof(float));
      offset += c.row;
    }
  }

  // Reads samples [first, first + count) of a column into `out` (count * row floats).
  void read_rows(const Column& c, std::int64_t first, std::int64_t count, float* out) const {
    const hsize_t total = static_cast<hsize_t>(count * c.row);
    if (total == 0) return;
    H5Handle fspace(H5Dget_space(c.dset.get()), H5Sclose);
    std::vector<hsize_t> start(c.dims.size(), 0), extent(c.dims.begin(), c.dims.end());
    start[0] = static_cast<hsize_t>(first);
    extent[0] = static_cast<hsize_t>(count);
    H5Handle mspace(H5Screate_simple(1, &total, nullptr), H5Sclose);
    if (!fspace.valid() || !mspace.valid() ||
        H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(),
                            nullptr) < 0 ||
        H5Dread(c.dset.get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, out) < 0)
      throw DataError(path_ + ": cannot read samples [" + std::to_string(first) + ", " +
                      std::to_string(first + count) + ") of dataset '" + c.name + "' (" +
                      hdf5_error_text() + ")");
  }

  const Block* find_block(std::int64_t index) const {
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (it->index == index) {
        cache_.splice(cache_.begin(), cache_, it);  // most recently used first
        return &cache_.front();
      }
    }
    return nullptr;
  }

  const Block& load_block(std::int64_t index) const {
    Block b;
    if (static_cast<int>(cache_.size()) >= std::max(1, options_.cache_blocks)) {
      b = std::move(cache_.back());  // reuse the evicted block's buffers
      cache_.pop_back();
    }
    b.index = index;
    b.first = index * stats_.block_rows;
    const std::int64_t rows = std::min(stats_.block_rows, n_ - b.first);
    b.x.resize(static_cast<std::size_t>(rows * x_.row));
    b.y.resize(static_cast<std::size_t>(rows * y_.row));
    read_rows(x_, b.first, rows, b.x.data());
    read_rows(y_, b.first, rows, b.y.data());
    ++stats_.block_loads;
    cache_.push_front(std::move(b));
    return cache_.front();
  }

  // Reads sorted (sample, position) pairs run by run of consecutive samples, bypassing the cache.
  void read_direct(const std::vector<std::pair<std::int64_t, std::size_t>>& rows, float* x,
                   float* y) const {
    for (std::size_t r = 0; r < rows.size();) {
      std::size_t end = r + 1;
      while (end < rows.size() && rows[end].first - rows[end - 1].first <= 1) ++end;
      const std::int64_t first = rows[r].first;
      const std::int64_t count = rows[end - 1].first - first + 1;
      run_x_.resize(static_cast<std::size_t>(count * x_.row));
      run_y_.resize(static_cast<std::size_t>(count * y_.row));
      read_rows(x_, first, count, run_x_.data());
      read_rows(y_, first, count, run_y_.data());
      for (std::size_t m = r; m < end; ++m)
        copy_row(run_x_, run_y_, rows[m].first - first, rows[m].second, x, y);
      stats_.direct_rows += count;
      r = end;
    }
  }

  std::string path_;
  Hdf5ReadOptions options_;
  H5Handle file_;
  ColumnGroup x_, y_;  // y_: the targets, then the weights when weight_count_ > 0
  Shape y_shape_;      // the targets'
  std::vector<Shape> y_parts_;
  std::int64_t weight_count_ = 0;  // the weights' values per sample (0: none)
  std::int64_t n_ = 0;
  std::vector<float> x_all_, y_all_;  // whole data, when small
  // Read state: read() is called from one thread at a time (see Dataset).
  mutable std::list<Block> cache_;
  mutable std::vector<float> run_x_, run_y_, part_;
  mutable std::int64_t last_block_ = -2;
  mutable Hdf5Stats stats_;
};

}  // namespace

namespace {

// "x": "name", or a list of names (one per model input or output, packed in order); absent:
// the dataset named like the key.
std::vector<std::string> dataset_names(ConfigObject& spec, const char* key) {
  if (!spec.find(key)) return {key};
  return name_list(spec, key, "dataset name", " (one per model input or output)");
}

}  // namespace

Hdf5Spec parse_hdf5_spec(ConfigObject& spec, const std::string& base_dir) {
  Hdf5Spec s;
  s.file = spec.get_string("path");
  if (s.file.empty()) throw ConfigError(spec.path_of("path"), "expected a file name, got ''");
  s.file = resolve_path(base_dir, s.file);
  s.x_names = dataset_names(spec, "x");
  if (spec.given("y") && !spec.has("y")) {  // "y": null: no targets, data to predict
    spec.ignore({"y"});
    s.y_names.clear();
  } else {
    s.y_names = dataset_names(spec, "y");
  }
  if (s.y_names.empty() && spec.has("sample_weight"))
    throw ConfigError(spec.path_of("sample_weight"),
                      "weighs the samples' targets, and with \"y\": null there are none");
  if (spec.has("sample_weight")) {
    s.weight_name = spec.get_string("sample_weight");
    if (s.weight_name.empty())
      throw ConfigError(spec.path_of("sample_weight"), "expected a dataset name, got ''");
  } else {
    spec.ignore({"sample_weight"});  // null: none, as absent
  }
  return s;
}

std::shared_ptr<Dataset> open_hdf5_dataset(const Hdf5Spec& spec, Hdf5ReadOptions options) {
  return std::make_shared<Hdf5Dataset>(spec, options);
}

std::optional<Hdf5Stats> hdf5_stats(const Dataset& dataset) {
  if (const auto* h = dynamic_cast<const Hdf5Dataset*>(&dataset)) return h->stats();
  return std::nullopt;
}

}  // namespace tandem::data
