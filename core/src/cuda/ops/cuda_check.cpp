#include "cuda/ops/cuda_check.hpp"

#include <cstdio>

#include "tandem/error.hpp"

namespace tandem::cuda {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw RunError(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(e) + " (error " +
                 std::to_string(static_cast<int>(e)) + ")");
}

void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw RunError(std::string("cuBLAS ") + what + " failed: " + cublasLtGetStatusString(s) +
                 " (status " + std::to_string(static_cast<int>(s)) + ")");
}

std::string format_bytes(std::size_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes >= (std::size_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
  else if (bytes >= (std::size_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  return buf;
}

void throw_out_of_memory(int device, std::size_t bytes, std::size_t held_bytes,
                         const std::string& context) {
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
  std::string msg = "CUDA out of memory on cuda:" + std::to_string(device) +
                    ": could not allocate " + format_bytes(bytes);
  if (!context.empty()) msg += " for " + context;
  msg += " (Tandem holds " + format_bytes(held_bytes);
  if (total_bytes > 0)
    msg += "; the GPU has " + format_bytes(free_bytes) + " free of " + format_bytes(total_bytes);
  msg +=
      "). Lower batch_size, spread the batch over more GPUs (\"devices\": \"cuda:all\"), or "
      "free the GPU of other processes (see `tandem devices`).";
  throw RunError(msg);
}

}  // namespace tandem::cuda
