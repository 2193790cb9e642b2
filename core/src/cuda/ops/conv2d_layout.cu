// Private (CUDA module): the kernel layout conversions of conv2d_layout.hpp, as one tiled
// transpose: 32 x 32 tiles through shared memory, so both the reads and the writes are coalesced;
// a grid-stride loop over the tiles, so any kernel size fits one launch.
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "cuda/ops/conv2d_layout.hpp"
#include "cuda/ops/launch.cuh"

namespace tandem::cuda {

namespace {

constexpr int kTile = 32;     // a tile is kTile x kTile elements
constexpr int kTileRows = 8;  // threads per block: kTile x kTileRows, each moving kTile/kTileRows
constexpr int kMaxTileBlocks = 65535 * 16;

// dst (cols x rows) = src (rows x cols) transposed, both row-major.
__global__ void transpose_kernel(const float* src, float* dst, std::int64_t rows, std::int64_t cols,
                                 std::int64_t tiles_across, std::int64_t tiles) {
  __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts on the column reads
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const std::int64_t r0 = (t / tiles_across) * kTile;
    const std::int64_t c0 = (t % tiles_across) * kTile;
    for (int i = ty; i < kTile; i += kTileRows) {
      const std::int64_t r = r0 + i, c = c0 + tx;
      if (r < rows && c < cols) tile[i][tx] = src[r * cols + c];
    }
    __syncthreads();
    for (int i = ty; i < kTile; i += kTileRows) {
      const std::int64_t c = c0 + i, r = r0 + tx;  // dst row c, column r
      if (c < cols && r < rows) dst[c * rows + r] = tile[tx][i];
    }
    __syncthreads();  // the tile is refilled by the next iteration
  }
}

void transpose(const float* src, float* dst, std::int64_t rows, std::int64_t cols,
               cudaStream_t stream, const char* what) {
  if (rows <= 0 || cols <= 0) return;
  const std::int64_t tiles_across = (cols + kTile - 1) / kTile;
  const std::int64_t tiles = ((rows + kTile - 1) / kTile) * tiles_across;
  const auto blocks = static_cast<unsigned>(tiles < kMaxTileBlocks ? tiles : kMaxTileBlocks);
  transpose_kernel<<<blocks, dim3(kTile, kTileRows), 0, stream>>>(src, dst, rows, cols,
                                                                  tiles_across, tiles);
  check_launch(what);
}

}  // namespace

void hwio_to_krsc(const float* hwio, float* krsc, std::int64_t patch, std::int64_t filters,
                  cudaStream_t stream) {
  transpose(hwio, krsc, patch, filters, stream, "hwio_to_krsc (Conv2D kernel to cuDNN)");
}

void krsc_to_hwio(const float* krsc, float* hwio, std::int64_t patch, std::int64_t filters,
                  cudaStream_t stream) {
  transpose(krsc, hwio, filters, patch, stream, "krsc_to_hwio (cuDNN filter gradient to Keras)");
}

}  // namespace tandem::cuda
