// The fused optimizer step. Without clipnorm/global_clipnorm: one grid-stride kernel over all n
// values. With them: (1) per tile of kTile values of one tensor, the sum of squares in double
// (threads add strided values in order, then a fixed tree); (2) per tensor, its tiles' sums in
// tile order; (3) one thread: the global sum in tensor order (as the CPU adds the tensors' norms)
// and each tensor's gradient factor; (4) the update, per tile, with its tensor's factor. Tensors
// go to the kernels in batches of kMaxBatch, described in the launch arguments.
//
// Against the CPU: the element-wise update is the same arithmetic, bit for bit. A tensor's sum of
// squares adds the same exact double squares, in a different order (the CPU: one sequential
// pass), so it can differ in the last bits of the double; the gradient factor is then rounded to
// float, which hides that unless it lies within ~1e-16 relative of a float rounding boundary.
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/optimizer_update.hpp"
#include "tandem/error.hpp"

#include <string>

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kTile = 8192;  // values per block for the norms and the clipped update
constexpr int kMaxBatch = 64;         // tensors per launch

// The update rule's slots (null past its count) and, with use_ema, the moving averages.
struct Slots {
  float* p[3];
  float* average;
};

// A batch of consecutive tensors: tensor j of the batch (global index first + j) holds values
// [start[j], start[j + 1]) and blocks [tile[j], tile[j + 1]) of the launch.
struct SegmentBatch {
  int count;
  int first;
  std::int64_t partial_base;  // the batch's first tile in the scratch partials
  std::int64_t start[kMaxBatch + 1];
  std::int64_t tile[kMaxBatch + 1];
};

std::int64_t tiles_of(std::int64_t len) {
  return (len + kTile - 1) / kTile;
}

int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

__device__ float* slot_at(float* p, std::int64_t k) {
  return p ? p + k : nullptr;
}

__device__ void update_one(const backend::math::OptimizerStep& s, float* w, const float* g, Slots slots,
                           std::int64_t k, double scale) {
  backend::math::update_element(s, w + k, backend::math::clipped_gradient(s, g[k], scale), slot_at(slots.p[0], k),
                     slot_at(slots.p[1], k), slot_at(slots.p[2], k));
  if (slots.average) backend::math::average_element(s, w + k, slots.average + k);
}

// gradient_accumulation_steps: the call's gradient added to the accumulator (then the averages
// move, use_ema, with the weights unchanged), or the accumulator made the combined gradient.
__global__ void accumulate_kernel(backend::math::OptimizerStep s, float* w, const float* g,
                                  float* accumulated, float* average, std::int64_t n) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (s.combine) {
      accumulated[k] = backend::math::combined_gradient(s, g[k], accumulated[k]);
    } else {
      backend::math::accumulate_element(g[k], accumulated + k);
      if (average) backend::math::average_element(s, w + k, average + k);
    }
  }
}

__global__ void update_kernel(backend::math::OptimizerStep s, float* w, const float* g, Slots slots,
                              std::int64_t n) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    update_one(s, w, g, slots, k, 1.0);
}

// The tensor j of the batch that block b works on, and the values of its tile.
__device__ int tile_range(const SegmentBatch& batch, std::int64_t b, std::int64_t& begin,
                          std::int64_t& end) {
  int j = 0;
  while (j + 1 < batch.count && b >= batch.tile[j + 1]) ++j;
  begin = batch.start[j] + (b - batch.tile[j]) * kTile;
  end = begin + kTile < batch.start[j + 1] ? begin + kTile : batch.start[j + 1];
  return j;
}

__global__ void partial_squares_kernel(SegmentBatch batch, const float* g, double* partials) {
  __shared__ double sums[kThreads];
  std::int64_t begin, end;
  tile_range(batch, blockIdx.x, begin, end);
  double s = 0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const double x = backend::math::f2d(g[i]);
    s = backend::math::dadd(s, backend::math::dmul(x, x));
  }
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      sums[threadIdx.x] = backend::math::dadd(sums[threadIdx.x], sums[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[batch.partial_base + blockIdx.x] = sums[0];
}

__global__ void tensor_squares_kernel(SegmentBatch batch, const double* partials, double* squared) {
  const int j = threadIdx.x;
  if (j >= batch.count) return;
  double s = 0;
  for (std::int64_t b = batch.tile[j]; b < batch.tile[j + 1]; ++b)
    s = backend::math::dadd(s, partials[batch.partial_base + b]);
  squared[batch.first + j] = s;
}

__global__ void clip_scales_kernel(const double* squared, double* scales, std::int64_t tensors,
                                   double clipnorm, double global_clipnorm) {
  double total = 0;
  for (std::int64_t i = 0; i < tensors; ++i) total = backend::math::dadd(total, squared[i]);
  const double global = backend::math::global_clip_scale(total, global_clipnorm);
  for (std::int64_t i = 0; i < tensors; ++i)
    scales[i] = backend::math::tensor_clip_scale(global, squared[i], clipnorm);
}

__global__ void clipped_update_kernel(SegmentBatch batch, backend::math::OptimizerStep s, float* w,
                                      const float* g, Slots slots, const double* scales) {
  std::int64_t begin, end;
  const int j = tile_range(batch, blockIdx.x, begin, end);
  const double scale = scales[batch.first + j];
  for (std::int64_t k = begin + threadIdx.x; k < end; k += kThreads)
    update_one(s, w, g, slots, k, scale);
}

void check_segments(std::int64_t n, const std::vector<std::int64_t>& segments) {
  bool ok = segments.size() >= 2 && segments.front() == 0 && segments.back() == n;
  for (std::size_t i = 1; ok && i < segments.size(); ++i) ok = segments[i - 1] <= segments[i];
  if (!ok)
    throw RunError("optimizer_update: segments must run from 0 to n = " + std::to_string(n) +
                   " in order (" + std::to_string(segments.size()) + " offsets given)");
}

// Batches of up to kMaxBatch consecutive tensors.
template <class F>
void for_each_batch(const std::vector<std::int64_t>& segments, F&& f) {
  const int tensors = static_cast<int>(segments.size()) - 1;
  std::int64_t partial_base = 0;
  for (int first = 0; first < tensors; first += kMaxBatch) {
    SegmentBatch batch{};
    batch.count = tensors - first < kMaxBatch ? tensors - first : kMaxBatch;
    batch.first = first;
    batch.partial_base = partial_base;
    for (int j = 0; j <= batch.count; ++j) {
      batch.start[j] = segments[static_cast<std::size_t>(first + j)];
      batch.tile[j] =
          j == 0 ? 0 : batch.tile[j - 1] + tiles_of(batch.start[j] - batch.start[j - 1]);
    }
    partial_base += batch.tile[batch.count];
    f(batch);
  }
}

// The update proper, from the gradient g (the call's, or the combined one).
void update_combined(const backend::OptimizerDesc& o, const backend::math::OptimizerStep& st,
                     float* w, const float* g, Slots s, std::int64_t n,
                     const std::vector<std::int64_t>& segments, float* scratch,
                     cudaStream_t stream) {
  if (!(o.clipnorm > 0) && !(o.global_clipnorm > 0)) {
    update_kernel<<<blocks_for(n), kThreads, 0, stream>>>(st, w, g, s, n);
    check(cudaGetLastError(), "optimizer_update");
    return;
  }

  if (!scratch || reinterpret_cast<std::uintptr_t>(scratch) % alignof(double) != 0)
    throw RunError(
        "optimizer_update: clipnorm needs an 8-byte aligned scratch of "
        "optimizer_scratch_floats() floats");
  const auto tensors = static_cast<std::int64_t>(segments.size()) - 1;
  const std::int64_t total_tiles = optimizer_scratch_floats(n, segments) / 2 - 2 * tensors;
  double* partials = reinterpret_cast<double*>(scratch);
  double* squared = partials + total_tiles;
  double* scales = squared + tensors;
  for_each_batch(segments, [&](const SegmentBatch& batch) {
    const std::int64_t blocks = batch.tile[batch.count];
    if (blocks > 0) {
      partial_squares_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(batch, g,
                                                                                     partials);
      check(cudaGetLastError(), "optimizer_update (squares)");
    }
    tensor_squares_kernel<<<1, kMaxBatch, 0, stream>>>(batch, partials, squared);
    check(cudaGetLastError(), "optimizer_update (norms)");
  });
  clip_scales_kernel<<<1, 1, 0, stream>>>(squared, scales, tensors, o.clipnorm, o.global_clipnorm);
  check(cudaGetLastError(), "optimizer_update (clip factors)");
  for_each_batch(segments, [&](const SegmentBatch& batch) {
    const std::int64_t blocks = batch.tile[batch.count];
    if (blocks == 0) return;
    clipped_update_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(batch, st, w, g,
                                                                                  s, scales);
    check(cudaGetLastError(), "optimizer_update (clipped)");
  });
}

}  // namespace

std::int64_t optimizer_scratch_floats(std::int64_t n, const std::vector<std::int64_t>& segments) {
  check_segments(n, segments);
  std::int64_t tiles = 0;
  for (std::size_t i = 1; i < segments.size(); ++i)
    tiles += tiles_of(segments[i] - segments[i - 1]);
  const auto tensors = static_cast<std::int64_t>(segments.size()) - 1;
  return 2 * (tiles + 2 * tensors);  // doubles: partials, squared norms, factors
}

void optimizer_update(const backend::OptimizerDesc& o, float* w, const float* g,
                      const std::vector<float*>& slots, std::int64_t n,
                      const std::vector<std::int64_t>& segments, std::int64_t step, double lr,
                      float* scratch, cudaStream_t stream) {
  check_segments(n, segments);
  const int count = backend::math::optimizer_slot_count(o);
  if (static_cast<int>(slots.size()) != count)
    throw RunError("optimizer_update: the optimizer has " + std::to_string(count) +
                   " slots per parameter, " + std::to_string(slots.size()) + " given");
  if (n == 0) return;
  Slots s{{nullptr, nullptr, nullptr}, nullptr};
  const int rule = backend::math::update_slot_count(o);
  for (int i = 0; i < rule; ++i) s.p[i] = slots[static_cast<std::size_t>(i)];
  if (o.use_ema) s.average = slots[static_cast<std::size_t>(rule)];
  const backend::math::OptimizerStep st = backend::math::optimizer_step(o, step, lr);
  if (st.ema_from_weights)  // tf.keras 2's averages start at the weights before the first step
    check(cudaMemcpyAsync(s.average, w, static_cast<std::size_t>(n) * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream),
          "optimizer_update (the averages' start)");
  float* accumulated = st.accumulate_only || st.combine
                           ? slots[static_cast<std::size_t>(backend::math::accumulator_slot(o))]
                           : nullptr;
  if (accumulated) {
    accumulate_kernel<<<blocks_for(n), kThreads, 0, stream>>>(st, w, g, accumulated, s.average, n);
    check(cudaGetLastError(), "optimizer_update (gradient accumulation)");
    if (st.accumulate_only) return;
    g = accumulated;  // the update reads the combined gradient; emptied behind it
  }
  update_combined(o, st, w, g, s, n, segments, scratch, stream);
  if (accumulated)
    check(cudaMemsetAsync(accumulated, 0, static_cast<std::size_t>(n) * sizeof(float), stream),
          "optimizer_update (emptying the accumulator)");
}

}  // namespace tandem::cuda
