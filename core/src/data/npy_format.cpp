#include "data/npy_format.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "tandem/error.hpp"

namespace tandem::data {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

[[noreturn]] void refuse(const std::string& where, const std::string& why) {
  throw DataError(where + ": " + why);
}

// A Python literal of the kinds a .npy header holds.
struct Literal {
  enum class Kind { string, boolean, tuple, other };
  Kind kind = Kind::other;
  std::string text;                 // string
  bool flag = false;                // boolean
  std::vector<std::int64_t> items;  // tuple of ints
};

// Reads the header's dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  std::map<std::string, Literal> dict() {
    std::map<std::string, Literal> out;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') {
        ++at_;
        break;
      }
      const std::string key = string_literal();
      expect(':');
      if (out.count(key)) fail("the key '" + key + "' appears twice");
      out[key] = value();
      skip_space();
      if (peek() == ',') {
        ++at_;
        continue;
      }
      expect('}');
      break;
    }
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    refuse(where_, "not a valid .npy header (" + why + " at byte " + std::to_string(at_) +
                       " of the header)");
  }
  char peek() const { return at_ < s_.size() ? s_[at_] : '\0'; }
  void skip_space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n')) ++at_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++at_;
  }
  std::string string_literal() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const std::size_t end = s_.find(quote, at_ + 1);
    if (end == std::string_view::npos) fail("an unterminated string");
    std::string text(s_.substr(at_ + 1, end - at_ - 1));
    at_ = end + 1;
    return text;
  }
  std::int64_t integer() {
    skip_space();
    const std::size_t start = at_;
    while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
    if (at_ == start) fail("expected a whole number");
    if (at_ - start > 18) fail("a dimension too large");
    const std::int64_t v = std::stoll(std::string(s_.substr(start, at_ - start)));
    if (peek() == 'L') ++at_;  // Python 2's long
    return v;
  }
  Literal value() {
    skip_space();
    Literal v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = Literal::Kind::string;
      v.text = string_literal();
    } else if (s_.substr(at_, 4) == "True" || s_.substr(at_, 5) == "False") {
      v.kind = Literal::Kind::boolean;
      v.flag = s_[at_] == 'T';
      at_ += v.flag ? 4 : 5;
    } else if (c == '(') {
      v.kind = Literal::Kind::tuple;
      ++at_;
      skip_space();
      while (peek() != ')') {
        v.items.push_back(integer());
        skip_space();
        if (peek() == ',')
          ++at_;
        else if (peek() != ')')
          fail("expected ',' or ')' in the shape");
        skip_space();
      }
      ++at_;
    } else if (c == '[') {
      refuse(where_,
             "a structured dtype (a list of fields), which Tandem does not read; save "
             "one numeric array per file instead");
    } else {
      fail("an unexpected value");
    }
    return v;
  }

  std::string_view s_;
  const std::string& where_;
  std::size_t at_ = 0;
};

NpyType parse_descr(const std::string& descr, const std::string& where) {
  if (descr.size() < 2) refuse(where, "unknown dtype '" + descr + "'");
  const char order = descr[0];
  const char kind = descr[1];
  const std::string size = descr.substr(2);
  if (descr == "|O" || descr == "O" || kind == 'O')
    refuse(where,
           "an object array (dtype 'O') holds Python objects, not numbers: save a numeric "
           "array, e.g. np.save(f, a.astype(np.float32))");
  if (order != '<' && order != '>' && order != '|' && order != '=')
    refuse(where, "unknown byte order in dtype '" + descr + "'");
  NpyType t;
  t.big_endian = order == '>';
  switch (kind) {
    case 'b':
      t.kind = NpyType::Kind::boolean;
      break;
    case 'i':
      t.kind = NpyType::Kind::signed_int;
      break;
    case 'u':
      t.kind = NpyType::Kind::unsigned_int;
      break;
    case 'f':
      t.kind = NpyType::Kind::floating;
      break;
    case 'c':
      refuse(where, "complex numbers (dtype '" + descr + "') cannot be trained on");
    case 'U':
    case 'S':
    case 'a':
      refuse(where, "an array of strings (dtype '" + descr +
                        "'): map the strings to numbers first (or use a CSV dataset)");
    default:
      refuse(where, "dtype '" + descr +
                        "' is not a number type Tandem reads (bool, int8-64, "
                        "uint8-64, float16/32/64)");
  }
  if (size != "1" && size != "2" && size != "4" && size != "8")
    refuse(where, "dtype '" + descr + "' has an element size Tandem does not read");
  t.bytes = size[0] - '0';
  if ((t.kind == NpyType::Kind::boolean && t.bytes != 1) ||
      (t.kind == NpyType::Kind::floating && t.bytes == 1))
    refuse(where, "dtype '" + descr + "' is not a number type Tandem reads");
  return t;
}

template <typename U>
U swap_bytes(U bits) {
  U out = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) {
    out = static_cast<U>((out << 8) | (bits & 0xff));
    bits = static_cast<U>(bits >> 8);
  }
  return out;
}

template <typename T>
T load(const std::uint8_t* p, bool swap) {
  using U = std::conditional_t<
      sizeof(T) == 1, std::uint8_t,
      std::conditional_t<sizeof(T) == 2, std::uint16_t,
                         std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;
  U bits;
  std::memcpy(&bits, p, sizeof bits);
  if (swap) bits = swap_bytes(bits);
  return std::bit_cast<T>(bits);
}

float half_to_float(std::uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31)
    return mantissa ? std::numeric_limits<float>::quiet_NaN()
                    : sign * std::numeric_limits<float>::infinity();
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

template <typename T>
void convert(const std::uint8_t* data, std::size_t count, bool swap, float* out) {
  for (std::size_t i = 0; i < count; ++i)
    out[i] = static_cast<float>(load<T>(data + i * sizeof(T), swap));
}

}  // namespace

NpyHeader parse_npy_header(std::string_view bytes, const std::string& where) {
  if (bytes.size() < 10 || bytes.substr(0, kMagic.size()) != kMagic)
    refuse(where, bytes.size() < 10 ? "too short for a .npy file"
                                    : "not a .npy file (it does not start with \\x93NUMPY)");
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_len, preamble;
  if (major == 1) {
    header_len = load<std::uint16_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()) + 8,
                                     std::endian::native == std::endian::big);
    preamble = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) refuse(where, "too short for a .npy file");
    header_len = load<std::uint32_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()) + 8,
                                     std::endian::native == std::endian::big);
    preamble = 12;
  } else {
    refuse(where, ".npy format version " + std::to_string(major) + " (this reads 1, 2 and 3)");
  }
  if (header_len > kMaxNpyHeaderBytes)
    refuse(where, "a .npy header of " + std::to_string(header_len) + " bytes is implausible");
  if (bytes.size() < preamble + header_len) refuse(where, "truncated in the .npy header");

  const auto dict = HeaderParser(bytes.substr(preamble, header_len), where).dict();
  for (const char* key : {"descr", "fortran_order", "shape"})
    if (!dict.count(key)) refuse(where, std::string("the .npy header has no '") + key + "'");
  if (dict.size() != 3)
    refuse(where, "the .npy header has keys other than descr, fortran_order, shape");
  const Literal& descr = dict.at("descr");
  const Literal& fortran = dict.at("fortran_order");
  const Literal& shape = dict.at("shape");
  if (descr.kind != Literal::Kind::string) refuse(where, "the .npy header's descr is not a string");
  if (fortran.kind != Literal::Kind::boolean)
    refuse(where, "the .npy header's fortran_order is not True or False");
  if (shape.kind != Literal::Kind::tuple) refuse(where, "the .npy header's shape is not a tuple");

  NpyHeader h;
  h.type = parse_descr(descr.text, where);
  if (fortran.flag)
    refuse(
        where,
        "the array is in Fortran order; save it in C order: np.save(f, np.ascontiguousarray(a))");
  h.shape = shape.items;
  h.data_offset = preamble + header_len;
  std::uint64_t elements = 1;
  constexpr std::uint64_t kLimit = std::uint64_t{1} << 56;
  for (std::int64_t d : h.shape) {
    if (d > 0 && elements > kLimit / static_cast<std::uint64_t>(d))
      refuse(where, "the .npy header's shape is implausibly large");
    elements *= static_cast<std::uint64_t>(d);
  }
  h.elements = elements;
  h.data_bytes = elements * static_cast<std::uint64_t>(h.type.bytes);
  return h;
}

void npy_to_float(const NpyType& type, const std::uint8_t* data, std::size_t count, float* out) {
  const bool swap = type.big_endian != (std::endian::native == std::endian::big);
  switch (type.kind) {
    case NpyType::Kind::boolean:
      for (std::size_t i = 0; i < count; ++i) out[i] = data[i] != 0 ? 1.0f : 0.0f;
      return;
    case NpyType::Kind::unsigned_int:
      if (type.bytes == 1) return convert<std::uint8_t>(data, count, false, out);
      if (type.bytes == 2) return convert<std::uint16_t>(data, count, swap, out);
      if (type.bytes == 4) return convert<std::uint32_t>(data, count, swap, out);
      return convert<std::uint64_t>(data, count, swap, out);
    case NpyType::Kind::signed_int:
      if (type.bytes == 1) return convert<std::int8_t>(data, count, false, out);
      if (type.bytes == 2) return convert<std::int16_t>(data, count, swap, out);
      if (type.bytes == 4) return convert<std::int32_t>(data, count, swap, out);
      return convert<std::int64_t>(data, count, swap, out);
    case NpyType::Kind::floating:
      if (type.bytes == 2) {
        for (std::size_t i = 0; i < count; ++i)
          out[i] = half_to_float(load<std::uint16_t>(data + 2 * i, swap));
        return;
      }
      if (type.bytes == 4) return convert<float>(data, count, swap, out);
      return convert<double>(data, count, swap, out);
  }
}

}  // namespace tandem::data
