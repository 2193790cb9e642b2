#include "checkpoint/filepath_template.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace tandem::checkpoint {

namespace {

bool is_align(char c) {
  return c == '<' || c == '>' || c == '^' || c == '=';
}

// Python's repr() of a float: the shortest text that reads back to the same value, fixed notation
// for exponents -4..15 (with ".0" for whole numbers), scientific otherwise ("1e-05", "1e+16").
std::string python_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto sci = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, sci.ptr);
  const auto e = s.find('e');
  const int exponent = std::stoi(s.substr(e + 1));
  if (exponent >= -4 && exponent < 16) {
    auto fixed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
    std::string f(buf, fixed.ptr);
    if (f.find('.') == std::string::npos) f += ".0";
    return f;
  }
  // to_chars writes "1e-05" / "1e+16" already (at least two exponent digits), as Python does.
  return s;
}

std::string printf_double(const char* conv, int precision, bool alternate, double v) {
  std::string fmt =
      std::string("%") + (alternate ? "#" : "") + "." + std::to_string(precision) + conv;
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, fmt.c_str(), v);
  if (n < 0 || static_cast<std::size_t>(n) >= sizeof buf)
    throw std::invalid_argument("the value " + python_repr(v) + " is too long to format");
  return std::string(buf, static_cast<std::size_t>(n));
}

// Python's format of a float with a precision and no type ("{lr:.3}"): 'g' with p significant
// digits (0 read as 1), except that scientific notation starts at an exponent of p - 1 (not p)
// and fixed notation keeps one digit after the point: 1.0 -> "1.0" at .3, "1e+00" at .0.
std::string python_general(int precision, bool alternate, double v) {
  const int p = precision == 0 ? 1 : precision;
  if (!std::isfinite(v)) return printf_double("g", p, alternate, v);
  const std::string sci = printf_double("e", p - 1, alternate, v);
  const int exponent = std::atoi(sci.c_str() + sci.find('e') + 1);
  const auto strip = [&](std::string digits) {  // trailing zeros of the fraction, as 'g' does
    if (alternate || digits.find('.') == std::string::npos) return digits;
    digits.erase(digits.find_last_not_of('0') + 1);
    if (digits.back() == '.') digits.pop_back();
    return digits;
  };
  if (exponent < -4 || exponent >= p - 1) {
    const std::size_t e = sci.find('e');
    return strip(sci.substr(0, e)) + sci.substr(e);
  }
  std::string fixed = strip(printf_double("f", p - 1 - exponent, alternate, v));
  if (fixed.find('.') == std::string::npos) fixed += ".0";
  return fixed;
}

std::string to_base(std::uint64_t v, int base, bool upper) {
  if (v == 0) return "0";
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string s;
  while (v > 0) {
    s.insert(s.begin(), digits[v % static_cast<std::uint64_t>(base)]);
    v /= static_cast<std::uint64_t>(base);
  }
  return s;
}

}  // namespace

FilepathTemplate::FilepathTemplate(std::string text) : text_(std::move(text)) {
  std::string literal;
  for (std::size_t i = 0; i < text_.size(); ++i) {
    const char c = text_[i];
    if (c == '}') {
      if (i + 1 < text_.size() && text_[i + 1] == '}') {
        literal += '}';
        ++i;
        continue;
      }
      throw std::invalid_argument("single '}' at position " + std::to_string(i) +
                                  " (write '}}' for a literal brace)");
    }
    if (c != '{') {
      literal += c;
      continue;
    }
    if (i + 1 < text_.size() && text_[i + 1] == '{') {
      literal += '{';
      ++i;
      continue;
    }
    const auto close = text_.find('}', i + 1);
    if (close == std::string::npos)
      throw std::invalid_argument("'{' at position " + std::to_string(i) +
                                  " has no closing '}' (write '{{' for a literal brace)");
    const std::string field = text_.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string::npos)
      throw std::invalid_argument("nested fields are not supported: {" + field + "}");
    const auto colon = field.find(':');
    const std::string name = field.substr(0, colon);
    if (name.find('!') != std::string::npos)
      throw std::invalid_argument("conversions such as !r or !s are not supported: {" + field +
                                  "}");
    if (name.empty())
      throw std::invalid_argument(
          "a field without a name: {" + field +
          "}; name the value, such as {epoch:02d}, {step} or {val_loss:.4f}");
    Piece piece;
    piece.field = name;
    if (colon != std::string::npos) {
      try {
        piece.spec = parse_spec(field.substr(colon + 1));
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("{" + field + "}: " + e.what());
      }
    }
    if (!literal.empty()) pieces_.push_back({literal, "", {}});
    literal.clear();
    pieces_.push_back(std::move(piece));
    i = close;
  }
  if (!literal.empty()) pieces_.push_back({literal, "", {}});
}

FilepathTemplate::Spec FilepathTemplate::parse_spec(const std::string& s) {
  Spec spec;
  std::size_t i = 0;
  if (s.size() >= 2 && is_align(s[1])) {
    spec.fill = s[0];
    spec.align = s[1];
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    spec.align = s[0];
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
  if (i < s.size() && s[i] == 'z') ++i;  // Python 3.11 "no negative zero": harmless here
  if (i < s.size() && s[i] == '#') {
    spec.alternate = true;
    ++i;
  }
  if (i < s.size() && s[i] == '0') {
    if (!spec.align) {
      spec.fill = '0';
      spec.align = '=';
    }
    ++i;
  }
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    spec.width = spec.width * 10 + (s[i++] - '0');
    if (spec.width > 256) throw std::invalid_argument("width over 256");
  }
  if (i < s.size() && (s[i] == ',' || s[i] == '_'))
    throw std::invalid_argument("digit grouping (',' or '_') is not supported in file names");
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || s[i] < '0' || s[i] > '9')
      throw std::invalid_argument("'.' must be followed by a precision");
    int p = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      p = p * 10 + (s[i++] - '0');
      if (p > 100) throw std::invalid_argument("precision over 100");
    }
    spec.precision = p;
  }
  if (i < s.size()) {
    const std::string types = "dxXobfFeEgG%s";
    if (types.find(s[i]) == std::string::npos)
      throw std::invalid_argument(std::string("unknown format type '") + s[i] +
                                  "' (supported: d x X o b f F e E g G % s)");
    spec.type = s[i++];
  }
  if (i < s.size()) throw std::invalid_argument("invalid format spec '" + s + "'");
  return spec;
}

std::string FilepathTemplate::apply(const Spec& spec, const FieldValue& value,
                                    const std::string& name) {
  std::string sign, prefix, body;
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("cannot format {" + name + "}: " + why);
  };
  char type = spec.type;
  std::optional<std::int64_t> as_int;
  double as_double = 0;
  if (std::holds_alternative<std::int64_t>(value)) {
    as_int = std::get<std::int64_t>(value);
    as_double = static_cast<double>(*as_int);
  } else {
    as_double = std::get<double>(value);
    if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b') {
      if (!std::isfinite(as_double) || std::floor(as_double) != as_double ||
          std::fabs(as_double) > 9.0e18)
        throw bad("format type '" + std::string(1, type) + "' needs a whole number, the value is " +
                  python_repr(as_double));
      as_int = static_cast<std::int64_t>(as_double);
    }
  }
  if (type == 's') throw bad("format type 's' needs text; the value is a number");
  // as_int is set for integer values, and for log values under an integer type.
  const bool integer_format = as_int && (type == 0 || type == 'd' || type == 'x' || type == 'X' ||
                                         type == 'o' || type == 'b');
  if (integer_format) {
    if (spec.precision) throw bad("a precision is not allowed with an integer format");
    const std::int64_t v = *as_int;
    const std::uint64_t mag =
        v < 0 ? static_cast<std::uint64_t>(-(v + 1)) + 1 : static_cast<std::uint64_t>(v);
    if (v < 0)
      sign = "-";
    else if (spec.sign == '+')
      sign = "+";
    else if (spec.sign == ' ')
      sign = " ";
    switch (type) {
      case 'x':
      case 'X':
        body = to_base(mag, 16, type == 'X');
        if (spec.alternate) prefix = type == 'X' ? "0X" : "0x";
        break;
      case 'o':
        body = to_base(mag, 8, false);
        if (spec.alternate) prefix = "0o";
        break;
      case 'b':
        body = to_base(mag, 2, false);
        if (spec.alternate) prefix = "0b";
        break;
      default:
        body = to_base(mag, 10, false);
    }
  } else {
    const double v = as_double;
    const double mag = std::fabs(v);
    if (std::signbit(v) && !std::isnan(v))
      sign = "-";
    else if (spec.sign == '+')
      sign = "+";
    else if (spec.sign == ' ')
      sign = " ";
    const int p = spec.precision.value_or(6);
    switch (type) {
      case 'f':
        body = printf_double("f", p, spec.alternate, mag);
        break;
      case 'F':
        body = printf_double("F", p, spec.alternate, mag);
        break;
      case 'e':
        body = printf_double("e", p, spec.alternate, mag);
        break;
      case 'E':
        body = printf_double("E", p, spec.alternate, mag);
        break;
      case 'g':
        body = printf_double("g", p == 0 ? 1 : p, spec.alternate, mag);
        break;
      case 'G':
        body = printf_double("G", p == 0 ? 1 : p, spec.alternate, mag);
        break;
      case '%':
        body = printf_double("f", p, spec.alternate, mag * 100) + "%";
        break;
      default:
        body = spec.precision ? python_general(p, spec.alternate, mag) : python_repr(mag);
    }
  }
  const std::string core = sign + prefix + body;
  const int len = static_cast<int>(core.size());
  if (spec.width <= len) return core;
  const int pad = spec.width - len;
  const char align = spec.align ? spec.align : '>';
  const std::string fill(static_cast<std::size_t>(pad), spec.fill);
  switch (align) {
    case '<':
      return core + fill;
    case '^':
      return std::string(static_cast<std::size_t>(pad / 2), spec.fill) + core +
             std::string(static_cast<std::size_t>(pad - pad / 2), spec.fill);
    case '=':
      return sign + prefix + fill + body;
    default:
      return fill + core;
  }
}

std::vector<std::string> FilepathTemplate::fields() const {
  std::vector<std::string> out;
  for (const auto& p : pieces_)
    if (!p.field.empty()) out.push_back(p.field);
  return out;
}

bool FilepathTemplate::uses(const std::string& name) const {
  for (const auto& p : pieces_)
    if (p.field == name) return true;
  return false;
}

std::string FilepathTemplate::format(const std::map<std::string, FieldValue>& values) const {
  std::string out;
  for (const auto& p : pieces_) {
    if (p.field.empty()) {
      out += p.literal;
      continue;
    }
    auto it = values.find(p.field);
    if (it == values.end()) throw std::out_of_range(p.field);
    out += apply(p.spec, it->second, p.field);
  }
  return out;
}

}  // namespace tandem::checkpoint
