#include "app/prediction_writer.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "tandem/atomic_file.hpp"
#include "tandem/error.hpp"

namespace tandem::app {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A CSV field as RFC 4180 writes it: quoted, its quotes doubled, when it holds a comma, a quote
// or a line break; as it is otherwise.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + '"';
}

void write_csv(const Tensor& t, const std::vector<std::string>& files, std::ostream& out) {
  const std::int64_t rows = t.rank() > 0 ? t.dim(0) : 1;
  const std::int64_t cols = rows > 0 ? t.size() / rows : 0;
  char buffer[32];
  for (std::int64_t r = 0; r < rows; ++r) {
    if (!files.empty()) out << csv_field(files[static_cast<std::size_t>(r)]) << (cols ? "," : "");
    for (std::int64_t c = 0; c < cols; ++c) {
      std::snprintf(buffer, sizeof buffer, "%.9g", t[r * cols + c]);
      if (c) out << ',';
      out << buffer;
    }
    out << '\n';
  }
}

void write_jsonl(const Tensor& t, const std::vector<std::string>& files, std::ostream& out) {
  const std::int64_t rows = t.rank() > 0 ? t.dim(0) : 1;
  const std::int64_t cols = rows > 0 ? t.size() / rows : 0;
  char buffer[32];
  for (std::int64_t r = 0; r < rows; ++r) {
    // A file name need not be UTF-8: bytes that are not become U+FFFD.
    if (!files.empty())
      out << "{\"path\":"
          << nlohmann::json(files[static_cast<std::size_t>(r)])
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
          << ",\"outputs\":";
    out << '[';
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = t[r * cols + c];
      // JSON has no NaN or infinity: they are written as null.
      if (std::isfinite(v)) std::snprintf(buffer, sizeof buffer, "%.9g", v);
      else std::snprintf(buffer, sizeof buffer, "null");
      if (c) out << ',';
      out << buffer;
    }
    out << (files.empty() ? "]\n" : "]}\n");
  }
}

void write_npy(const Tensor& t, std::ostream& out) {
  std::string shape = "(";
  for (int i = 0; i < t.rank(); ++i)
    shape += std::to_string(t.dim(i)) + (t.rank() == 1 ? ",)" : (i + 1 < t.rank() ? ", " : ")"));
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  out.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out << header;
  out.write(reinterpret_cast<const char*>(t.data()),
            static_cast<std::streamsize>(t.size() * sizeof(float)));
}

}  // namespace

PredictionFormat prediction_format(const std::string& format, const std::string& path) {
  if (format == "csv") return PredictionFormat::csv;
  if (format == "npy") return PredictionFormat::npy;
  if (format == "jsonl") return PredictionFormat::jsonl;
  if (!format.empty())
    throw ConfigError("--format", "expected csv, npy or jsonl, got '" + format + "'");
  if (path == "-" || ends_with(path, ".csv")) return PredictionFormat::csv;
  if (ends_with(path, ".npy")) return PredictionFormat::npy;
  if (ends_with(path, ".jsonl")) return PredictionFormat::jsonl;
  throw ConfigError("--output", "expected '-', a .csv, .npy or .jsonl file name, or --format, got '" +
                                    path + "'");
}

void write_predictions(const Tensor& predictions, const std::vector<std::string>& files,
                       const std::string& path, PredictionFormat format) {
  const std::int64_t rows = predictions.rank() > 0 ? predictions.dim(0) : 1;
  if (!files.empty() && static_cast<std::int64_t>(files.size()) != rows)
    throw std::logic_error("write_predictions: " + std::to_string(files.size()) +
                           " file names for " + std::to_string(rows) + " rows");
  const auto write = [&](std::ostream& out) {
    switch (format) {
      case PredictionFormat::csv:
        return write_csv(predictions, files, out);
      case PredictionFormat::npy:
        return write_npy(predictions, out);
      case PredictionFormat::jsonl:
        return write_jsonl(predictions, files, out);
    }
  };
  if (path == "-") {
    write(std::cout);
    std::cout.flush();
    return;
  }
  // Streamed to a temporary file next to the target, then fsync, rename, fsync of the folder: a
  // failed or interrupted predict leaves any previous output whole (tandem/atomic_file.hpp).
  AtomicFile file(path);
  {
    // The stream's failures keep the system's reason in errno (open(2), write(2)).
    errno = 0;
    std::ofstream out(file.temp_path(), std::ios::binary | std::ios::trunc);
    if (out) {
      write(out);
      out.close();
    }
    if (!out) {
      const int error = errno;
      throw RunError("cannot write '" + path + "': cannot write its temporary file '" +
                     file.temp_path().string() +
                     "': " + (error != 0 ? std::strerror(error) : "unknown error"));
    }
  }
  file.commit();
}

}  // namespace tandem::app
