// Shared helpers for Tandem's tests: scratch folders, running commands, reference paths.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tandem/layer.hpp"

namespace tandem::test {

/// A fresh, empty folder under the build tree, unique to this test and process.
std::filesystem::path scratch_dir(const std::string& tag);

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
/// Runs `command` through /bin/sh, capturing stdout and stderr separately.
CommandResult run_command(const std::string& command);

/// What the exception of type E that `f` throws says; "(no error)" when it throws none.
template <typename E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

/// Debian's Python, which has torch and h5py (the python3 first on PATH does not).
inline const char* system_python() {
  return "/usr/bin/python3";
}
/// Writes the Python program `code` to `script` and runs it with system_python() and the
/// arguments `args` (one string, as the shell splits it).
CommandResult run_python(const std::filesystem::path& script, const std::string& code,
                         const std::string& args);
/// Whether the .npy arrays `got` and `want` have one shape and max|got − want| ≤ rtol ·
/// max|want| (NumPy compares them; its script is written to `scratch`); the failure names the
/// relative error or NumPy's complaint.
::testing::AssertionResult npy_close(const std::filesystem::path& got,
                                     const std::filesystem::path& want, double rtol,
                                     const std::filesystem::path& scratch);
/// The ConfigError message of building a model from `model_config` (Model::from_config), or
/// "(no error)" when it builds.
std::string model_config_error(const nlohmann::json& model_config);
/// A layer of Keras class `cls` made by the layer registry from its `config` object, as a model
/// makes it once it has read the common keys (name, trainable, dtype, activity_regularizer:
/// ignored here): named by the config's "name", else "layer". Throws what the registry throws.
std::unique_ptr<Layer> make_layer(const std::string& cls, const nlohmann::json& config);
/// make_layer's ConfigError message, or "(no error)" when it makes the layer.
std::string layer_config_error(const std::string& cls, const nlohmann::json& config);
inline std::filesystem::path source_dir() {
  return TANDEM_SOURCE_DIR;
}
inline std::string tandem_cli() {
  return TANDEM_CLI;
}
/// The Fashion-MNIST folder of Debian's dataset-fashion-mnist package.
inline std::filesystem::path fashion_mnist_dir() {
  return "/usr/share/datasets/fashion-mnist";
}

std::string read_text(const std::filesystem::path& path);
void write_text(const std::filesystem::path& path, const std::string& text);

/// Writes `config` to dir/<name>.json and runs `tandem train` on it into the run folder
/// dir/<name>, quietly, with `extra` arguments.
CommandResult train_in(const std::filesystem::path& dir, const std::string& name,
                       const nlohmann::json& config, const std::string& extra = "");
/// train_in(dir, name, config, extra), then `tandem predict` of that config with the run's
/// weights into dir/<name>.npy: the first failing command's result, or the prediction's.
CommandResult train_and_predict(const std::filesystem::path& dir, const std::string& name,
                                const nlohmann::json& config, const std::string& extra = "");
/// The history (one logs object per epoch) of the finished run in folder `run_dir`, from its
/// events.jsonl; null when no run finished there.
nlohmann::json run_history(const std::filesystem::path& run_dir);

/// A Keras 2 functional layer's inbound_nodes: per call, the references it takes
/// (["layer", node, tensor, {}]). Built from vectors: a braced list of one json is a copy of it
/// for some compilers (clang), not a list.
nlohmann::json keras2_calls(std::initializer_list<std::vector<nlohmann::json>> per_call);
/// A Keras 2 functional model's layer entry: class, name (also in its config) and config, called
/// once on layer `from`'s output (no call for an InputLayer: `from` null).
nlohmann::json keras2_node(const std::string& cls, const std::string& name, nlohmann::json config,
                           const char* from);

/// An options schema of `depth` nested objects, each with one option "p": a list of objects
/// whose default holds ten of them. Its defaults expand to 10^depth values (a 1 KB schema that
/// once grew to gigabytes); a check must refuse it past a million.
nlohmann::json defaults_growing_tenfold(int depth);

/// Whether this build (the tests and the binaries they run) is instrumented by AddressSanitizer
/// or ThreadSanitizer (scripts/sanitize, scripts/sanitize-threads), whose shadow memory needs
/// terabytes of address space (no `ulimit -v`) and whose timings say nothing.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizer = true;
#else
inline constexpr bool kSanitizer = false;
#endif
#else
inline constexpr bool kSanitizer = false;
#endif

/// The smallest run config: Dense(3) on 4 features, SGD on mse, one epoch of 16 synthetic
/// regression samples in batches of 8 (name "tiny", seed 1). Tests change what they need.
nlohmann::json tiny_regression_config();
/// A CSV table of 40 rows: features a, b, c, d and a class index `label` in [0, 3); row
/// `bad_row` labelled 7 (out of range) when given, for runs that fail at its batch.
void write_class_table(const std::filesystem::path& file, int bad_row = -1);

}  // namespace tandem::test
