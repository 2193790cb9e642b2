// The "npy" and "npz" dataset types: NumPy arrays, x and y, one sample per row of their first
// dimension. .npy files and the stored members of a .npz (np.savez) are read whole when they are
// small enough (NpySpec::whole_limit_bytes, as np.load reads them), otherwise row by row from
// disk as the run goes (a file rewritten meanwhile is a DataError, see RandomAccessFile);
// deflated members (np.savez_compressed) are inflated into memory once.
#include <limits>
#include <memory>
#include <optional>
#include <variant>

#include "data/datasets.hpp"
#include "data/npy_format.hpp"
#include "data/npz_archive.hpp"
#include "io/random_access_file.hpp"
#include "tandem/error.hpp"

namespace tandem::data {

namespace {

// One array: its header and where its elements are (in a file or in memory).
class NpyColumn {
 public:
  NpyColumn(std::shared_ptr<const RandomAccessFile> file, std::uint64_t offset, std::uint64_t size,
            std::string where)
      : file_(std::move(file)), where_(std::move(where)) {
    if (offset > file_->size() || size > file_->size() - offset)
      throw DataError(where_ + ": the archive is truncated (the array lies past its end)");
    std::string head(static_cast<std::size_t>(std::min<std::uint64_t>(size, kHeadBytes)), '\0');
    file_->read(offset, head.size(), head.data());
    init(head, size);
    elements_offset_ = offset + header_.data_offset;
  }
  NpyColumn(std::vector<std::uint8_t> bytes, std::string where)
      : owned_(std::move(bytes)), where_(std::move(where)) {
    init(std::string_view(reinterpret_cast<const char*>(owned_.data()), owned_.size()),
         owned_.size());
    elements_offset_ = header_.data_offset;
  }
  // Moves keep owned_'s buffer.
  NpyColumn(NpyColumn&&) = default;
  NpyColumn(const NpyColumn&) = delete;
  NpyColumn& operator=(const NpyColumn&) = delete;

  std::int64_t rows() const { return header_.shape[0]; }
  Shape row_shape() const { return Shape(header_.shape.begin() + 1, header_.shape.end()); }
  std::int64_t row_size() const { return row_elements_; }
  const NpyHeader& header() const { return header_; }
  const std::string& where() const { return where_; }

  /// Converts row `row` into `out`; `scratch` holds a file's bytes on the way.
  void copy_row(std::int64_t row, float* out, double scale,
                std::vector<std::uint8_t>& scratch) const {
    const std::size_t bytes = static_cast<std::size_t>(row_elements_) * header_.type.bytes;
    const std::uint64_t at = elements_offset_ + static_cast<std::uint64_t>(row) * bytes;
    const std::uint8_t* elements = nullptr;
    if (file_ && native_floats()) {  // the common case: read straight into the row
      file_->read(at, bytes, out);
    } else if (file_) {
      scratch.resize(bytes);
      file_->read(at, bytes, scratch.data());
      elements = scratch.data();
    } else {
      elements = owned_.data() + at;
    }
    if (elements)
      npy_to_float(header_.type, elements, static_cast<std::size_t>(row_elements_), out);
    if (scale != 1.0)
      for (std::int64_t i = 0; i < row_elements_; ++i) out[i] = static_cast<float>(out[i] * scale);
  }

  /// Elements stored as this machine's float (little-endian float32): no conversion.
  bool native_floats() const {
    return header_.type.kind == NpyType::Kind::floating && header_.type.bytes == 4 &&
           !header_.type.big_endian;
  }

  /// DataError when the file read from has changed since it was opened.
  void check_unchanged() const {
    if (file_) file_->check_unchanged();
  }

 private:
  // Enough of an array's bytes for any header Tandem reads.
  static constexpr std::uint64_t kHeadBytes = 12 + kMaxNpyHeaderBytes;

  // `head`: the array's first bytes (at least its header when the array is whole); `size`: all
  // of its bytes.
  void init(std::string_view head, std::uint64_t size) {
    header_ = parse_npy_header(head, where_);
    if (header_.shape.empty())
      throw DataError(where_ + ": a scalar, not an array of samples (its first dimension)");
    if (header_.shape[0] < 1) throw DataError(where_ + ": no samples (its first dimension is 0)");
    const std::uint64_t have = size - std::min<std::uint64_t>(size, header_.data_offset);
    if (have < header_.data_bytes)
      throw DataError(where_ + ": truncated: the header promises " +
                      std::to_string(header_.data_bytes) + " bytes of data, there are " +
                      std::to_string(have));
    if (have > header_.data_bytes)
      throw DataError(where_ + ": trailing data: the header promises " +
                      std::to_string(header_.data_bytes) + " bytes of data, there are " +
                      std::to_string(have));
    if (header_.elements / static_cast<std::uint64_t>(header_.shape[0]) >
        static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()))
      throw DataError(where_ + ": more than 2^31 - 1 values per sample");
    row_elements_ = static_cast<std::int64_t>(header_.elements / header_.shape[0]);
  }

  std::shared_ptr<const RandomAccessFile> file_;  // null: the bytes are owned_
  std::vector<std::uint8_t> owned_;
  std::string where_;
  NpyHeader header_;
  std::uint64_t elements_offset_ = 0;  // in the file or in owned_
  std::int64_t row_elements_ = 0;
};

// x and, unless the data is to be predicted, y.
class NpyDataset final : public Dataset {
 public:
  NpyDataset(NpyColumn x, std::optional<NpyColumn> y, double scale, std::string description)
      : x_(std::move(x)), y_(std::move(y)), scale_(scale), description_(std::move(description)) {}

  std::int64_t size() const override { return x_.rows(); }
  Shape x_shape() const override { return x_.row_shape(); }
  Shape y_shape() const override { return y_ ? y_->row_shape() : Shape{0}; }

  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    std::vector<std::uint8_t> scratch;
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const std::int64_t i = indices[k];
      if (i < 0 || i >= size())
        throw DataError(x_.where() + ": sample " + std::to_string(i) + " out of range (" +
                        std::to_string(size()) + " samples)");
      x_.copy_row(i, x + static_cast<std::int64_t>(k) * x_.row_size(), scale_, scratch);
      if (y_) y_->copy_row(i, y + static_cast<std::int64_t>(k) * y_->row_size(), 1.0, scratch);
    }
    // After the rows: a file rewritten while they were read has a new modification time.
    x_.check_unchanged();
    if (y_) y_->check_unchanged();
  }

  std::string describe() const override { return description_; }

 private:
  NpyColumn x_;
  std::optional<NpyColumn> y_;
  double scale_;
  std::string description_;
};

// The array in bytes [offset, offset + size) of `file`: whole in memory up to `whole_limit`
// bytes (NpySpec; a row is then a copy from memory, where a read from disk costs a system call:
// half the input pipeline's speed for Fashion-MNIST-sized rows, and the run no longer depends on
// the file), else read row by row.
NpyColumn column_of(const std::shared_ptr<const RandomAccessFile>& file, std::uint64_t offset,
                    std::uint64_t size, std::string where, std::uint64_t whole_limit) {
  if (size > whole_limit || offset > file->size() || size > file->size() - offset)
    return NpyColumn(file, offset, size, std::move(where));
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  file->read(offset, bytes.size(), bytes.data());
  return NpyColumn(std::move(bytes), std::move(where));
}

NpyColumn npy_file(const std::string& file, std::uint64_t whole_limit) {
  auto opened = std::make_shared<const RandomAccessFile>(file);
  const std::uint64_t size = opened->size();
  return column_of(opened, 0, size, "'" + file + "'", whole_limit);
}

NpyColumn npz_array(const std::shared_ptr<const RandomAccessFile>& archive, const std::string& name,
                    std::uint64_t whole_limit) {
  ZipMember m = read_npz_member(archive->path(), name);
  const std::string where = "'" + archive->path() + "': array '" + name + "'";
  if (m.stored) return column_of(archive, m.offset, m.size, where, whole_limit);
  return NpyColumn(std::move(m.inflated), where);
}

// A file or array name: required (no `fallback`) or defaulted, never empty.
std::string name_at(ConfigObject& spec, const char* key, const char* fallback = nullptr) {
  const std::string value = fallback ? spec.get_string(key, fallback) : spec.get_string(key);
  if (value.empty()) throw ConfigError(spec.path_of(key), "expected a name, got ''");
  return value;
}

}  // namespace

NpySpec parse_npy_spec(ConfigObject& spec, const std::string& base_dir, bool npz) {
  NpySpec s;
  s.npz = npz;
  if (npz) {
    s.archive = resolve_path(base_dir, name_at(spec, "path"));
    s.x = name_at(spec, "x", "x");
    // "y": null: x alone, data to predict.
    if (spec.given("y") && !spec.has("y"))
      spec.ignore({"y"});
    else
      s.y = name_at(spec, "y", "y");
  } else {
    s.x = resolve_path(base_dir, name_at(spec, "x"));
    if (spec.has("y")) s.y = resolve_path(base_dir, name_at(spec, "y"));  // none: to predict
  }
  if (spec.has("scale"))
    s.scale = spec.number_in("scale", 1.0, 0.0, std::numeric_limits<double>::max(), true);
  else
    spec.ignore({"scale"});
  return s;
}

std::shared_ptr<Dataset> open_npy_dataset(const NpySpec& spec) {
  std::optional<NpyColumn> x, y;
  std::string description;
  if (spec.npz) {
    auto archive = std::make_shared<const RandomAccessFile>(spec.archive);
    x.emplace(npz_array(archive, spec.x, spec.whole_limit_bytes));
    if (!spec.y.empty()) y.emplace(npz_array(archive, spec.y, spec.whole_limit_bytes));
    description =
        "npz: " + spec.archive + " [" + spec.x + (spec.y.empty() ? "" : ", " + spec.y) + "]";
  } else {
    x.emplace(npy_file(spec.x, spec.whole_limit_bytes));
    if (!spec.y.empty()) y.emplace(npy_file(spec.y, spec.whole_limit_bytes));
    description = "npy: " + spec.x + (spec.y.empty() ? "" : ", " + spec.y);
  }
  if (y && x->rows() != y->rows())
    throw DataError(x->where() + " has " + std::to_string(x->rows()) + " samples but " +
                    y->where() + " has " + std::to_string(y->rows()) + "; they must match");
  description += " (" + std::to_string(x->rows()) + " samples)";
  // Like IDX: bytes 0-255 are pixels, scaled to [0, 1] unless the spec says otherwise.
  const bool bytes =
      x->header().type.kind == NpyType::Kind::unsigned_int && x->header().type.bytes == 1;
  const double scale = spec.scale ? *spec.scale : (bytes ? 1.0 / 255.0 : 1.0);
  return std::make_shared<NpyDataset>(std::move(*x), std::move(y), scale, std::move(description));
}

}  // namespace tandem::data
