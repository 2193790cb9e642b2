// csv_logger: Keras CSVLogger — one row per epoch: `epoch` (0-based, as Keras writes it) and the
// epoch-end logs, sorted by key; a key missing from an epoch's logs is written `NA`.
//
// The file (`filename`, relative to the run folder unless absolute) is created at train begin, or
// with `append` continued: the header is written only when the file is new or empty. When an
// appended file already has a header, its columns are kept, so the rows stay aligned with it.
// Numbers are written as Python writes floats (repr: shortest round-trip digits, "1.0", "1e-05",
// "nan", "inf"); fields holding the separator or a quote are quoted as Python's csv module does.
// Each row is flushed at once. Rows end in "\n". Only rank 0 writes.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tandem/error.hpp"
#include "tandem/plugin.hpp"
#include "tandem/run_files.hpp"

namespace {

// The characters of UTF-8 text: its bytes less the continuation bytes (10xxxxxx).
std::size_t utf8_characters(const std::string& text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

using nlohmann::json;
using tandem::CallbackContext;
using tandem::Logs;

/// Python's repr(float): the shortest digits that read back to `v`, in fixed notation when the
/// decimal exponent is in [-4, 16), else in scientific notation with a two-digit exponent.
std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, res.ptr);  // "-1.2345e-05"
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const auto e = s.find('e');
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(s.substr(e + 1));
  if (exp >= -4 && exp < 16) {
    std::string out;
    if (exp < 0) {
      out = "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<std::size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<std::size_t>(exp + 1)) + "." +
            digits.substr(static_cast<std::size_t>(exp + 1));
    }
    return sign + out;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  char ex[16];
  std::snprintf(ex, sizeof ex, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return sign + mantissa + ex;
}

class CsvLogger : public tandem::Callback {
 public:
  CsvLogger(std::string filename, std::string separator, bool append, std::string option)
      : filename_(std::move(filename)),
        sep_(std::move(separator)),
        append_(append),
        option_(std::move(option)) {}
  std::string name() const override { return "csv_logger"; }

  void on_train_begin(CallbackContext& ctx, const Logs&) override {
    if (ctx.rank() != 0) return;
    path_ = filename_;
    tandem::refuse_run_file(ctx.run_dir(), path_, option_);
    if (path_.is_relative() && !ctx.run_dir().empty()) path_ = ctx.run_dir() / path_;
    keys_.clear();
    write_header_ = true;
    if (append_) {
      std::ifstream in(path_, std::ios::binary);
      std::string first;
      if (in && std::getline(in, first) && !first.empty()) {
        write_header_ = false;
        if (!first.empty() && first.back() == '\r') first.pop_back();
        const auto fields = split(first);
        if (!fields.empty() && fields[0] == "epoch") keys_.assign(fields.begin() + 1, fields.end());
      }
    }
    if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path());
    out_.open(path_, std::ios::binary | (append_ ? std::ios::app : std::ios::trunc));
    if (!out_) throw tandem::RunError("csv_logger: cannot open " + path_.string() + " for writing");
    have_keys_ = !keys_.empty();
  }

  void on_epoch_end(CallbackContext& ctx, int epoch, const Logs& logs) override {
    if (ctx.rank() != 0 || !out_.is_open()) return;
    if (!have_keys_) {
      for (const auto& [k, v] : logs.items()) keys_.push_back(k);
      std::sort(keys_.begin(), keys_.end());
      have_keys_ = true;
    }
    if (write_header_) {
      std::string header = quote("epoch");
      for (const auto& k : keys_) header += sep_ + quote(k);
      out_ << header << '\n';
      write_header_ = false;
    }
    // Every field quoted where it must be, as Python's csv module writes (QUOTE_MINIMAL): with
    // the separator "." a value 0.40625 is "0.40625".
    std::string row = quote(std::to_string(epoch));
    for (const auto& k : keys_) {
      const auto v = logs.get(k);
      row += sep_ + quote(v ? python_float(*v) : std::string("NA"));
    }
    out_ << row << '\n';
    out_.flush();
    if (!out_) throw tandem::RunError("csv_logger: cannot write " + path_.string());
  }

  void on_train_end(CallbackContext&, const Logs&) override {
    if (out_.is_open()) out_.close();
  }

 private:
  std::string quote(const std::string& field) const {
    if (field.find(sep_) == std::string::npos && field.find('"') == std::string::npos &&
        field.find('\n') == std::string::npos && field.find('\r') == std::string::npos)
      return field;
    std::string q = "\"";
    for (char c : field) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  }

  /// Splits a header line written by this logger (or Python's csv module) on the separator.
  std::vector<std::string> split(const std::string& line) const {
    std::vector<std::string> out;
    std::string cur;
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (quoted) {
        if (line[i] == '"' && i + 1 < line.size() && line[i + 1] == '"') {
          cur += '"';
          ++i;
        } else if (line[i] == '"') {
          quoted = false;
        } else {
          cur += line[i];
        }
      } else if (line[i] == '"') {
        quoted = true;
      } else if (line.compare(i, sep_.size(), sep_) == 0) {
        out.push_back(cur);
        cur.clear();
        i += sep_.size() - 1;
      } else {
        cur += line[i];
      }
    }
    out.push_back(cur);
    return out;
  }

  std::string filename_, sep_;
  bool append_;
  std::string option_;  // the filename option's config path, for errors
  std::filesystem::path path_;
  std::ofstream out_;
  std::vector<std::string> keys_;
  bool have_keys_ = false, write_header_ = true;
};

class CsvLoggerPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    json props = {{"filename",
                   {{"type", "string"},
                    {"minLength", 1},
                    {"description", "the CSV file; relative to the run folder unless absolute"}}},
                  {"separator",
                   {{"type", "string"},
                    {"minLength", 1},
                    {"default", ","},
                    {"description", "the field separator"}}},
                  {"append",
                   {{"type", "boolean"},
                    {"default", false},
                    {"description", "continue an existing file instead of overwriting it"}}}};
    return {"csv_logger",
            "1.0.0",
            "Writes the epoch-end logs to a CSV file (Keras CSVLogger)",
            {{"type", "object"},
             {"additionalProperties", false},
             {"required", json::array({"filename"})},
             {"properties", props}}};
  }

  std::shared_ptr<tandem::Callback> create(const json& options,
                                           const tandem::CallbackSetup& setup) const override {
    const std::string sep = options.at("separator").get<std::string>();
    // One character (one UTF-8 sequence: "é" too), as Python's csv module (Keras' CSVLogger
    // writes with it) reads and writes.
    if (utf8_characters(sep) != 1 || sep == "\"" || sep == "\n" || sep == "\r")
      throw tandem::ConfigError(setup.config_path + ".options.separator",
                                "expected one character, not a quote or a line break (a CSV "
                                "reader's delimiter), got " +
                                    options.at("separator").dump());
    const std::string filename = options.at("filename").get<std::string>();
    const std::string option = setup.config_path + ".options.filename";
    if (std::filesystem::path(filename).is_relative())  // the run folder is known at train begin
      tandem::refuse_run_file(".", filename, option);
    return std::make_shared<CsvLogger>(filename, sep, options.at("append").get<bool>(), option);
  }
};

}  // namespace

TANDEM_PLUGIN(CsvLoggerPlugin)
