#include "parallel/cuda_module.hpp"

#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <mutex>

#include "util/library_location.hpp"

namespace tandem::detail {

namespace {

CudaModule load() {
  CudaModule out;
#ifndef TANDEM_HAVE_CUDA
  out.why_not = "this Tandem was built without CUDA";
  return out;
#else
  const std::filesystem::path dir = tandem_library_dir();
  if (dir.empty()) {
    out.why_not = "the folder of libtandem could not be found, so neither could its CUDA module";
    return out;
  }
  std::filesystem::path file = dir / "tandem" / "modules" / "libtandem-cuda.so";
#ifdef TANDEM_BUILD_MODULE_DIR
  if (running_from_build_tree())
    file = std::filesystem::path(TANDEM_BUILD_MODULE_DIR) / file.filename();
#endif
  out.path = file.string();
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    out.why_not = "the CUDA module " + out.path +
                  " is not installed (on Debian: install the package tandem-cuda)";
    return out;
  }
  dlerror();
  // RTLD_LOCAL: the CUDA libraries it pulls in stay out of the global namespace; never unloaded
  // (the CUDA runtime registers exit handlers).
  void* handle = dlopen(out.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    const char* err = dlerror();
    out.why_not =
        "the CUDA module could not be loaded: " + std::string(err ? err : "unknown error") +
        " (it needs the CUDA 13 libraries libcublasLt.so.13 and libnccl.so.2 from NVIDIA's "
        "toolkit or wheels; see docs/gpu.md)";
    return out;
  }
  using Entry = const CudaModuleApi* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaModuleEntry));
  if (!entry) {
    out.why_not = "the CUDA module " + out.path + " has no " + kCudaModuleEntry + " entry point";
    return out;
  }
  const CudaModuleApi* api = entry();
  if (!api || !api->version || std::strcmp(api->version, TANDEM_VERSION) != 0) {
    out.why_not = "the CUDA module " + out.path + " is from Tandem " +
                  std::string(api && api->version ? api->version : "?") + ", not " +
                  TANDEM_VERSION + " (reinstall tandem-cuda of the same version)";
    return out;
  }
  out.api = api;
  return out;
#endif
}

}  // namespace

const CudaModule& cuda_module() {
  static std::once_flag once;
  static CudaModule module;
  std::call_once(once, [] { module = load(); });
  return module;
}

}  // namespace tandem::detail
