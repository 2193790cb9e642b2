#include "test_support.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "nn/layer_registry.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "util/config_object.hpp"

namespace tandem::test {

std::filesystem::path scratch_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  auto dir = std::filesystem::path(TANDEM_BINARY_DIR) / "test-scratch" /
             (tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

::testing::AssertionResult npy_close(const std::filesystem::path& got,
                                     const std::filesystem::path& want, double rtol,
                                     const std::filesystem::path& scratch) {
  static const char* const kCompare = R"PY(
import sys, numpy as np
a, b, rtol = np.load(sys.argv[1]), np.load(sys.argv[2]), float(sys.argv[3])
assert a.shape == b.shape, (a.shape, b.shape)
err = np.abs(a - b).max() / np.abs(b).max()
print(err)
sys.exit(0 if err <= rtol else 1)
)PY";
  const auto r = run_python(scratch / "npy_close.py", kCompare,
                            got.string() + " " + want.string() + " " + std::to_string(rtol));
  if (r.exit_code == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative error " << r.out << r.err;
}

std::string model_config_error(const nlohmann::json& model_config) {
  try {
    Model::from_config(model_config, "model", 0);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::unique_ptr<Layer> make_layer(const std::string& cls, const nlohmann::json& config) {
  ConfigObject c(config, "layer.config");
  c.ignore({"name", "trainable", "dtype", "activity_regularizer"});  // the Model reads these
  const std::string name = config.contains("name") && config["name"].is_string()
                               ? config["name"].get<std::string>()
                               : "layer";
  auto layer = nn::layer_registry().at(cls).make(c, name);
  c.finish();
  return layer;
}

std::string layer_config_error(const std::string& cls, const nlohmann::json& config) {
  try {
    make_layer(cls, config);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

CommandResult run_command(const std::string& command) {
  auto err_path = scratch_dir("stderr") / "stderr.txt";
  std::string full = "(" + command + ") 2>" + err_path.string();
  CommandResult result;
  FILE* pipe = ::popen(full.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed for: " + command);
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.err = read_text(err_path);
  std::filesystem::remove_all(err_path.parent_path());
  return result;
}

CommandResult train_in(const std::filesystem::path& dir, const std::string& name,
                       const nlohmann::json& config, const std::string& extra) {
  const std::filesystem::path path = dir / (name + ".json");
  write_text(path, config.dump(2));
  return run_command(tandem_cli() + " train " + path.string() + " --run-dir " +
                     (dir / name).string() + " -q " + extra);
}

CommandResult run_python(const std::filesystem::path& script, const std::string& code,
                         const std::string& args) {
  write_text(script, code);
  return run_command(std::string(system_python()) + " " + script.string() + " " + args);
}

nlohmann::json run_history(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / "events.jsonl");
  std::string line;
  nlohmann::json history;
  while (std::getline(in, line)) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event.value("event", "") == "run_finished") history = event["history"];
  }
  return history;
}

nlohmann::json tiny_regression_config() {
  return nlohmann::json::parse(R"({"name": "tiny", "seed": 1, "epochs": 1, "batch_size": 8,
      "model": {"class_name": "Sequential", "config": {"name": "s", "layers": [
          {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
          {"class_name": "Dense", "config": {"units": 3}}]}},
      "optimizer": "sgd", "loss": "mse",
      "data": {"train": {"type": "synthetic", "task": "regression", "samples": 16,
                         "x_shape": [4], "y_shape": [3]}}})");
}

void write_class_table(const std::filesystem::path& file, int bad_row) {
  std::ofstream out(file);
  out << "a,b,c,d,label\n";
  for (int r = 0; r < 40; ++r)
    out << (r % 7) * 0.25 << ',' << (r % 5) * -0.5 << ',' << (r % 3) * 0.75 << ',' << r * 0.01
        << ',' << (r == bad_row ? 7 : r % 3) << '\n';
}

nlohmann::json defaults_growing_tenfold(int depth) {
  nlohmann::json level = {{"type", "object"}};
  const nlohmann::json ten_objects(10, nlohmann::json::object());
  for (int d = 0; d < depth; ++d)
    level = {
        {"type", "object"},
        {"properties", {{"p", {{"type", "array"}, {"default", ten_objects}, {"items", level}}}}}};
  return level;
}

nlohmann::json keras2_calls(std::initializer_list<std::vector<nlohmann::json>> per_call) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::vector<nlohmann::json>& refs : per_call) out.push_back(nlohmann::json(refs));
  return out;
}

nlohmann::json keras2_node(const std::string& cls, const std::string& name, nlohmann::json config,
                           const char* from) {
  config["name"] = name;
  const nlohmann::json inbound =
      from ? keras2_calls({{nlohmann::json::array({from, 0, 0, nlohmann::json::object()})}})
           : nlohmann::json::array();
  return {{"class_name", cls}, {"name", name}, {"config", config}, {"inbound_nodes", inbound}};
}

CommandResult train_and_predict(const std::filesystem::path& dir, const std::string& name,
                                const nlohmann::json& config, const std::string& extra) {
  const CommandResult trained = train_in(dir, name, config, extra);
  if (trained.exit_code != 0) return trained;
  return run_command(tandem_cli() + " predict " + (dir / (name + ".json")).string() +
                     " --weights " + (dir / name / "model.h5").string() + " -o " +
                     (dir / (name + ".npy")).string());
}

}  // namespace tandem::test
