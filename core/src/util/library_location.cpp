#include "util/library_location.hpp"

#include <dlfcn.h>

namespace tandem::detail {

namespace fs = std::filesystem;

fs::path tandem_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&tandem_library_dir), &info) == 0 || !info.dli_fname)
    return {};
  std::error_code ec;
  fs::path p = fs::canonical(info.dli_fname, ec);
  return ec ? fs::path() : p.parent_path();
}

bool running_from_build_tree() {
#ifdef TANDEM_BUILD_LIB_DIR
  const fs::path lib = tandem_library_dir();
  std::error_code ec;
  return !lib.empty() && fs::equivalent(lib, TANDEM_BUILD_LIB_DIR, ec);
#else
  return false;
#endif
}

}  // namespace tandem::detail
