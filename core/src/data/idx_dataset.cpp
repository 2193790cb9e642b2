// IDX files (MNIST, Fashion-MNIST): a big-endian header (00 00 <type> <ndims>, then ndims
// uint32 dims) followed by the data, optionally gzip-compressed. Loaded into memory once.
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "data/datasets.hpp"
#include "tandem/error.hpp"
#include "util/regular_file.hpp"

namespace tandem::data {

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw DataError(file + ": " + what);
}

// An IDX file's bytes: plain, or gzip (one member or several, as gzip -c a b > c writes) read
// with zlib's inflate, which checks each member's CRC and length. A member cut short, or bytes
// after the last member that start no other, are errors (gzread took both silently: it stops
// where the caller stops reading, and ignores what follows a member).
class GzReader {
 public:
  explicit GzReader(const std::string& file) : file_(file) {
    if (const std::string why = not_a_regular_file(file); !why.empty()) fail(file, why);
    in_.open(file, std::ios::binary);
    if (!in_) fail(file, std::string("cannot open: ") + std::strerror(errno));
    fill();
    gzip_ = have_ >= 2 && buffer_[0] == 0x1f && buffer_[1] == 0x8b;
    if (gzip_ && inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) fail(file, "out of memory");
  }
  ~GzReader() {
    if (gzip_) inflateEnd(&z_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  /// Reads up to `n` bytes; fewer only at the end of the data. Corrupt data is an error.
  std::size_t read(void* out, std::size_t n) {
    auto* p = static_cast<unsigned char*>(out);
    return gzip_ ? inflate_into(p, n) : copy_into(p, n);
  }

 private:
  // Keeps the unread bytes, then reads more of the file after them; false when none came.
  bool fill() {
    const std::size_t left = have_ - next_;
    std::memmove(buffer_.data(), buffer_.data() + next_, left);
    in_.read(reinterpret_cast<char*>(buffer_.data() + left),
             static_cast<std::streamsize>(buffer_.size() - left));
    const auto got = static_cast<std::size_t>(in_.gcount());
    have_ = left + got;
    next_ = 0;
    return got > 0;
  }

  std::size_t copy_into(unsigned char* p, std::size_t n) {
    std::size_t done = 0;
    while (done < n && (next_ < have_ || fill())) {
      const std::size_t k = std::min(n - done, have_ - next_);
      std::memcpy(p + done, buffer_.data() + next_, k);
      next_ += k;
      done += k;
    }
    return done;
  }

  std::size_t inflate_into(unsigned char* p, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      if (next_ == have_ && !fill()) {
        // Cut short: what came is returned (the caller names the sizes); asked for more, or for
        // the end past data that was all there (a lost CRC), it is an error.
        if (in_member_ && done == 0)
          fail(file_, "truncated gzip data (its last member is cut short before its end)");
        break;
      }
      if (!in_member_) start_member();
      z_.next_in = buffer_.data() + next_;
      z_.avail_in = static_cast<uInt>(have_ - next_);
      z_.next_out = p + done;
      z_.avail_out = static_cast<uInt>(std::min<std::size_t>(n - done, 1u << 30));
      const int ret = inflate(&z_, Z_NO_FLUSH);
      next_ = have_ - z_.avail_in;
      done = static_cast<std::size_t>(z_.next_out - p);
      if (ret == Z_STREAM_END)
        in_member_ = false;
      else if (ret != Z_OK && ret != Z_BUF_ERROR)
        fail(file_, std::string("corrupt gzip data (") + (z_.msg ? z_.msg : "?") + ")");
    }
    return done;
  }

  // Bytes after a member start another member, or they are trailing garbage.
  void start_member() {
    if (have_ - next_ < 2) fill();
    if (have_ - next_ < 2 || buffer_[next_] != 0x1f || buffer_[next_ + 1] != 0x8b)
      fail(file_, "data after the gzip stream that is no gzip member (trailing garbage)");
    if (started_) inflateReset(&z_);
    started_ = in_member_ = true;
  }

  std::string file_;
  std::ifstream in_;
  std::vector<unsigned char> buffer_ = std::vector<unsigned char>(std::size_t{1} << 18);
  std::size_t have_ = 0, next_ = 0;  // bytes in buffer_, and the next unread one
  bool gzip_ = false;
  z_stream z_{};
  bool started_ = false, in_member_ = false;
};

std::size_t element_size(int type_code) {
  switch (type_code) {
    case 0x08:
    case 0x09:
      return 1;
    case 0x0B:
      return 2;
    case 0x0C:
    case 0x0D:
      return 4;
    case 0x0E:
      return 8;
    default:
      return 0;
  }
}

std::uint32_t load_be32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

// Decodes big-endian elements of a wide type into floats.
void decode_wide(int type_code, const std::vector<std::uint8_t>& raw, std::vector<float>& out) {
  const std::size_t es = element_size(type_code);
  const std::size_t n = raw.size() / es;
  out.resize(n);
  const unsigned char* p = raw.data();
  for (std::size_t i = 0; i < n; ++i, p += es) {
    switch (type_code) {
      case 0x0B: {
        const auto u = static_cast<std::uint16_t>((p[0] << 8) | p[1]);
        out[i] = static_cast<float>(static_cast<std::int16_t>(u));
        break;
      }
      case 0x0C:
        out[i] = static_cast<float>(static_cast<std::int32_t>(load_be32(p)));
        break;
      case 0x0D: {
        const std::uint32_t u = load_be32(p);
        float f;
        std::memcpy(&f, &u, sizeof f);
        out[i] = f;
        break;
      }
      default: {  // 0x0E
        const std::uint64_t u = (std::uint64_t{load_be32(p)} << 32) | load_be32(p + 4);
        double d;
        std::memcpy(&d, &u, sizeof d);
        out[i] = static_cast<float>(d);
        break;
      }
    }
  }
}

// One IDX array ready to be copied out row by row, times a scale.
class IdxColumn {
 public:
  IdxColumn(IdxArray array, double scale) : a_(std::move(array)) {
    row_ = 1;
    for (std::size_t i = 1; i < a_.dims.size(); ++i) row_ *= a_.dims[i];
    for (int v = 0; v < 256; ++v) {
      const int value = a_.type_code == 0x09 ? static_cast<std::int8_t>(v) : v;
      lut_[static_cast<std::size_t>(v)] = static_cast<float>(value * scale);
    }
    if (!a_.values.empty() && scale != 1.0)
      for (float& f : a_.values) f = static_cast<float>(f * scale);
  }
  std::int64_t samples() const { return a_.dims[0]; }
  Shape row_shape() const { return Shape(a_.dims.begin() + 1, a_.dims.end()); }
  const std::string& file() const { return a_.file; }

  void copy_row(std::int64_t i, float* out) const {
    const auto offset = static_cast<std::size_t>(i * row_);
    if (a_.values.empty()) {
      const std::uint8_t* p = a_.bytes.data() + offset;
      for (std::int64_t k = 0; k < row_; ++k) out[k] = lut_[p[k]];
    } else {
      std::memcpy(out, a_.values.data() + offset, static_cast<std::size_t>(row_) * sizeof(float));
    }
  }
  std::int64_t row_size() const { return row_; }

 private:
  IdxArray a_;
  std::int64_t row_ = 1;
  std::array<float, 256> lut_{};
};

class IdxDataset final : public Dataset {
 public:
  IdxDataset(IdxArray x, IdxArray y, double x_scale)
      : x_(std::move(x), x_scale), y_(std::move(y), 1.0) {}

  std::int64_t size() const override { return x_.samples(); }
  Shape x_shape() const override { return x_.row_shape(); }
  Shape y_shape() const override { return y_.row_shape(); }

  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    const std::int64_t n = size();
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const std::int64_t i = indices[k];
      if (i < 0 || i >= n)
        throw DataError(x_.file() + ": sample " + std::to_string(i) + " out of range (" +
                        std::to_string(n) + " samples)");
      x_.copy_row(i, x + static_cast<std::int64_t>(k) * x_.row_size());
      y_.copy_row(i, y + static_cast<std::int64_t>(k) * y_.row_size());
    }
  }

  std::string describe() const override {
    return "idx: " + x_.file() + ", " + y_.file() + " (" + std::to_string(size()) + " samples)";
  }

 private:
  IdxColumn x_;
  IdxColumn y_;
};

}  // namespace

IdxArray read_idx_file(const std::string& file) {
  GzReader in(file);
  IdxArray a;
  a.file = file;

  unsigned char magic[4];
  const std::size_t got = in.read(magic, 4);
  if (got == 0) fail(file, "empty file (expected an IDX header)");
  if (got < 4) fail(file, "truncated: the IDX header is cut short");
  if (magic[0] != 0 || magic[1] != 0 || element_size(magic[2]) == 0 || magic[3] == 0) {
    std::ostringstream msg;
    msg << "not an IDX file: bad magic " << std::hex;
    for (unsigned char c : magic) msg << (c < 16 ? "0" : "") << int{c};
    msg << " (expected 00 00 <type 08/09/0b/0c/0d/0e> <ndims>)";
    fail(file, msg.str());
  }
  a.type_code = magic[2];
  const int ndims = magic[3];

  std::vector<unsigned char> dims_raw(static_cast<std::size_t>(ndims) * 4);
  if (in.read(dims_raw.data(), dims_raw.size()) < dims_raw.size())
    fail(file, "truncated: the IDX header is cut short (" + std::to_string(ndims) +
                   " dimensions promised)");
  std::uint64_t count = 1;
  for (int d = 0; d < ndims; ++d) {
    const std::uint32_t dim = load_be32(dims_raw.data() + 4 * d);
    a.dims.push_back(dim);
    count *= dim;
    if (count > (std::uint64_t{1} << 40)) fail(file, "implausible IDX dimensions");
  }
  const std::size_t es = element_size(a.type_code);
  const std::uint64_t promised = count * es;

  // Read in chunks: a header that promises more than the file holds fails having allocated no
  // more than the file gave (a 116-byte file may claim 8 GB).
  constexpr std::uint64_t kChunk = std::uint64_t{64} << 20;
  std::vector<std::uint8_t> raw;
  while (raw.size() < promised) {
    const std::size_t at = raw.size();
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, promised - at));
    raw.resize(at + want);
    const std::size_t have = in.read(raw.data() + at, want);
    if (have < want)
      fail(file, "truncated: header promises " + std::to_string(promised) +
                     " bytes of data, file has " + std::to_string(at + have));
  }
  unsigned char extra;
  if (in.read(&extra, 1) != 0)
    fail(file, "trailing data: header promises " + std::to_string(promised) +
                   " bytes of data, file has more");

  if (es == 1) {
    a.bytes = std::move(raw);
  } else {
    decode_wide(a.type_code, raw, a.values);
  }
  return a;
}

IdxSpec parse_idx_spec(ConfigObject& spec, const std::string& base_dir) {
  IdxSpec s;
  s.x_file = spec.get_string("x");
  if (s.x_file.empty()) throw ConfigError(spec.path_of("x"), "expected a file name, got ''");
  s.y_file = spec.get_string("y");
  if (s.y_file.empty()) throw ConfigError(spec.path_of("y"), "expected a file name, got ''");
  s.x_file = resolve_path(base_dir, s.x_file);
  s.y_file = resolve_path(base_dir, s.y_file);
  if (spec.has("scale")) {
    s.scale = spec.number_in("scale", 1.0, 0.0, std::numeric_limits<double>::max(), true);
  } else {
    spec.ignore({"scale"});
  }
  return s;
}

std::shared_ptr<Dataset> open_idx_dataset(const IdxSpec& spec) {
  IdxArray x = read_idx_file(spec.x_file);
  IdxArray y = read_idx_file(spec.y_file);
  if (x.dims[0] != y.dims[0])
    throw DataError(spec.x_file + " has " + std::to_string(x.dims[0]) + " samples but " +
                    spec.y_file + " has " + std::to_string(y.dims[0]) + " labels; they must match");
  const double scale = spec.scale ? *spec.scale : (x.type_code == 0x08 ? 1.0 / 255.0 : 1.0);
  return std::make_shared<IdxDataset>(std::move(x), std::move(y), scale);
}

}  // namespace tandem::data
