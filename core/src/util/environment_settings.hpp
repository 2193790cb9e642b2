// The settings that belong to the machine rather than to a run (docs/config.md, Environment
// variables), read from the environment: each parsed in one place, so a CPU-only machine refuses
// garbage in a GPU setting as a GPU machine would. Plain functions; any thread.
#pragma once

#include <cstdint>
#include <optional>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// TANDEM_CONV2D: Conv2D's GPU path.
enum class Conv2DPathSetting { automatic, im2col, cudnn };
inline constexpr const char* kConv2DPathVariable = "TANDEM_CONV2D";

/// TANDEM_CONV2D ("auto" when unset; any case). ConfigError naming the variable and the values
/// it takes for anything else.
Conv2DPathSetting conv2d_path_setting();

/// TANDEM_CUDA_GRAPHS: false for "0", true when unset or "1". ConfigError naming the variable
/// for anything else.
bool cuda_graphs_setting();

/// TANDEM_CUDA_MEMORY_LIMIT in bytes (util/memory_size.hpp); nullopt when unset. ConfigError
/// naming the variable when it is no memory size.
std::optional<std::int64_t> cuda_memory_limit_setting();

/// Parses every setting (the two above, TANDEM_HOST_MEMORY_LIMIT, TANDEM_CUDA_MEMORY_LIMIT):
/// the first that is garbage is a ConfigError naming it, before any work starts.
void check_environment_settings();

}  // namespace tandem

TANDEM_INTERNAL_API_END
