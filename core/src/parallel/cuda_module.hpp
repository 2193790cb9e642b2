// Private: libtandem's handle on its CUDA module (parallel/cuda_module_api.hpp), loaded on first
// use from <libtandem's folder>/tandem/modules/libtandem-cuda.so (in the build tree: modules/).
#pragma once

#include <string>

#include "parallel/cuda_module_api.hpp"

namespace tandem::detail {

struct CudaModule {
  /// The module's table; null when it could not be loaded (then `why_not` says why, in words
  /// a user can act on: not built, not installed, a missing CUDA library, a version mismatch).
  const CudaModuleApi* api = nullptr;
  std::string why_not;
  /// The file loaded or looked for.
  std::string path;
};

/// Loads the module once per process (thread-safe); later calls return the same answer.
const CudaModule& cuda_module();

}  // namespace tandem::detail
