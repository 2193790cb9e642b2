// Private (CUDA module): every CUDA runtime and cuBLAS call is checked and turned into a RunError
// that says what failed, in words; out-of-memory says what to try.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace tandem::cuda {

/// Throws RunError("CUDA <what> failed: <reason> (error N)") unless e is cudaSuccess. Clears the
/// runtime's sticky last error first, so a later call starts clean when the error allows it.
void check(cudaError_t e, const char* what);
/// The same for cuBLAS and cuBLASLt status codes.
void check(cublasStatus_t s, const char* what);

/// The error of a failed device allocation: the device, the request, what Tandem holds on it, and
/// `context` (who asked: "a batch of 8192 samples per replica", ...), with what to try.
[[noreturn]] void throw_out_of_memory(int device, std::size_t bytes, std::size_t held_bytes,
                                      const std::string& context);

/// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(std::size_t bytes);

}  // namespace tandem::cuda
