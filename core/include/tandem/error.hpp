// Errors and the exit codes they map to (docs/design.md contract 7).
//
// Every error Tandem raises is a tandem::Error carrying the process exit code a CLI should use:
// 2 for bad usage, configuration or input data; 1 for a run that failed while running.
#pragma once

#include <stdexcept>
#include <string>

namespace tandem {

enum class ExitCode : int { ok = 0, run_failed = 1, bad_input = 2 };

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

/// A configuration value is missing, mistyped or out of range. `path` is the JSON path
/// ("model.config.layers[2].config.units").
class ConfigError : public Error {
 public:
  ConfigError(const std::string& path, const std::string& what)
      : Error(ExitCode::bad_input, "config error at '" + path + "': " + what), path_(path) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A dataset or file is missing, unreadable or malformed.
class DataError : public Error {
 public:
  explicit DataError(const std::string& what) : Error(ExitCode::bad_input, what) {}
};

/// Shapes that do not fit together (a layer given the wrong input, labels of the wrong size).
class ShapeError : public Error {
 public:
  explicit ShapeError(const std::string& what) : Error(ExitCode::bad_input, what) {}
};

/// Training could not go on (non-finite loss, a callback failure, an I/O error while saving).
class RunError : public Error {
 public:
  explicit RunError(const std::string& what) : Error(ExitCode::run_failed, what) {}
};

}  // namespace tandem
