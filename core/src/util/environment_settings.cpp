#include "util/environment_settings.hpp"

#include <cctype>
#include <cstdlib>
#include <string>

#include "tandem/error.hpp"
#include "util/memory_size.hpp"

namespace tandem {

namespace {

constexpr const char* kGraphs = "TANDEM_CUDA_GRAPHS";
constexpr const char* kCudaMemory = "TANDEM_CUDA_MEMORY_LIMIT";

}  // namespace

Conv2DPathSetting conv2d_path_setting() {
  const char* env = std::getenv(kConv2DPathVariable);
  std::string value = env ? env : "";
  for (char& ch : value) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (value.empty() || value == "auto") return Conv2DPathSetting::automatic;
  if (value == "im2col") return Conv2DPathSetting::im2col;
  if (value == "cudnn") return Conv2DPathSetting::cudnn;
  throw ConfigError(kConv2DPathVariable, std::string("the environment variable ") + kConv2DPathVariable +
                                 " picks Conv2D's GPU path: expected 'im2col', 'cudnn' or 'auto' "
                                 "(the default), got '" +
                                 env + "'");
}

bool cuda_graphs_setting() {
  const char* env = std::getenv(kGraphs);
  if (env == nullptr || std::string(env) == "1") return true;
  if (std::string(env) == "0") return false;
  throw ConfigError(kGraphs, std::string("the environment variable ") + kGraphs +
                                 " turns CUDA graphs off with '0' (on: '1' or unset), got '" + env +
                                 "'");
}

std::optional<std::int64_t> cuda_memory_limit_setting() {
  const char* text = std::getenv(kCudaMemory);
  if (text == nullptr) return std::nullopt;
  return parse_memory_size(text, kCudaMemory);
}

void check_environment_settings() {
  conv2d_path_setting();
  cuda_graphs_setting();
  host_memory_limit();
  cuda_memory_limit_setting();
}

}  // namespace tandem
