// Errors and the exit codes they map to (docs/design.md contract 7).
//
// Every error Tandem raises is a tandem::Error carrying the process exit code a CLI should use:
// 2 for bad usage, configuration or input data; 1 for a run that failed while running.
//
// Their destructors are libtandem's (util/error.cpp), so their vtables live there alone: an error
// a plugin throws stays valid after the plugin's library is unloaded.
//
// Errors are values (copyable, carrying their own message) and may cross threads, e.g. rethrown on
// the driving thread after a replica's worker failed. A plugin throws them as the engine does.
#pragma once

#include <stdexcept>
#include <string>

#include "tandem/export.hpp"

namespace tandem {

enum class ExitCode : int { ok = 0, run_failed = 1, bad_input = 2 };

class TANDEM_EXPORT Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ~Error() override;
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

/// A configuration value is missing, mistyped or out of range. `path` is the JSON path
/// ("model.config.layers[2].config.units").
class TANDEM_EXPORT ConfigError : public Error {
 public:
  ConfigError(const std::string& path, const std::string& what)
      : Error(ExitCode::bad_input, "config error at '" + path + "': " + what), path_(path) {}
  ~ConfigError() override;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A dataset or file is missing, unreadable or malformed.
class TANDEM_EXPORT DataError : public Error {
 public:
  explicit DataError(const std::string& what) : Error(ExitCode::bad_input, what) {}
  ~DataError() override;
};

/// Shapes that do not fit together (a layer given the wrong input, labels of the wrong size).
class TANDEM_EXPORT ShapeError : public Error {
 public:
  explicit ShapeError(const std::string& what) : Error(ExitCode::bad_input, what) {}
  ~ShapeError() override;
};

/// Training could not go on (non-finite loss, a callback failure, an I/O error while saving).
class TANDEM_EXPORT RunError : public Error {
 public:
  explicit RunError(const std::string& what) : Error(ExitCode::run_failed, what) {}
  ~RunError() override;
};

}  // namespace tandem
