// Memory sizes as people write them ("512M", "1.5GiB", "80G"), and the host memory the engine's
// tensors may take (TANDEM_HOST_MEMORY_LIMIT). Plain functions; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// Bytes from a memory size: a whole number of bytes, or a number with a binary unit ("512M",
/// "1.5GiB", "80G", "2T"; K, M, G, T with an optional "iB" or "B"). ConfigError at `where` for
/// anything else, zero or more than 2^60.
std::int64_t parse_memory_size(const std::string& text, const std::string& where);

/// The most bytes host tensors may hold together, and where that comes from.
struct HostMemoryLimit {
  std::int64_t bytes = 0;
  std::string source;  // "the machine's memory" or "TANDEM_HOST_MEMORY_LIMIT"
};

/// The machine's physical memory, or TANDEM_HOST_MEMORY_LIMIT (parse_memory_size) when that is
/// set and smaller. Throws ConfigError naming the variable when it is set to something else than
/// a memory size.
HostMemoryLimit host_memory_limit();

}  // namespace tandem

TANDEM_INTERNAL_API_END
