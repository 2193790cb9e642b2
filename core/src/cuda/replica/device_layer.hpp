// Private (CUDA module): the device twin of a host Layer — the unit a CUDA replica is built from.
//
// A CUDA replica mirrors its host model layer by layer: each host layer (nn/*.hpp) gets a
// DeviceLayer that computes the same function on the GPU, reading its settings from the host
// layer's Keras config() and its shapes from the host model. Parameters are not owned by the
// layer: they are slices of the replica's flat device arrays (values; gradients of trainable
// ones), bound once before the first forward, in the host layer's parameters() order.
//
// Activations are batch-major and channels_last, exactly the host tensors' layout, so a layer's
// input and output are plain `batch x per-sample size` float arrays.
//
// Ownership: a layer owns its own buffers (from ctx.allocator) and borrows the context, which
// outlives it. Thread-safety: one thread at a time (the replica's); all work on ctx.stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/ops/dense_gemm.hpp"
#include "cuda/ops/device_allocator.hpp"
#include "tandem/layer.hpp"

namespace tandem::cuda {

/// What every device layer of one replica shares.
struct DeviceContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  DeviceAllocator* allocator = nullptr;
  DenseGemm* gemm = nullptr;  // cuBLASLt, at the run's precision
  Precision precision = Precision::fp32;
};

/// One parameter of a device layer: slices of the replica's flat arrays. `grad` is null for a
/// parameter the optimizer does not update (non-trainable, or of a layer with trainable=false).
struct DeviceParameter {
  float* value = nullptr;
  float* grad = nullptr;
  std::int64_t size = 0;
};

class DeviceLayer {
 public:
  virtual ~DeviceLayer() = default;
  /// Called once before the first forward with the layer's parameters in the host layer's
  /// parameters() order (trainable first, then non-trainable; Keras weight order).
  virtual void bind(std::vector<DeviceParameter> params) { params_ = std::move(params); }
  /// x: `batch` samples on the device, kept valid by the caller until backward() returns.
  /// `training` as Layer::forward; `sample_offset` is the first row's place in the global batch
  /// (Dropout draws its mask from it, contract 1). Returns the output, owned by the layer (or x
  /// itself for a layer that does not change the data), valid until the next forward().
  virtual const float* forward(const float* x, std::int64_t batch, bool training,
                               std::int64_t sample_offset) = 0;
  /// dy: dL/d(output of the last forward). Sets the gradient of every parameter with a `grad`
  /// (nothing accumulated) and returns dL/dx when need_input_grad (may be dy itself), else null.
  virtual const float* backward(const float* dy, bool need_input_grad) = 0;
  /// The layer's random state (Dropout: {stream, calls}) to write back into the host layer;
  /// empty when it has none. set_random_state() takes the host layer's.
  virtual std::vector<std::uint64_t> random_state() const { return {}; }
  /// Whether forward() and backward() only queue work on ctx.stream — no host synchronization,
  /// no host state that changes from step to step — so a step can be captured in a CUDA graph
  /// and replayed. Embedding (it checks its indices on the host) is not.
  virtual bool capturable() const { return true; }
  /// Called instead of forward() and backward() for a training step in which this replica has
  /// no rows (a batch smaller than the plan): a layer that counts its training forwards
  /// (Dropout) counts this one, as the host layer's forward of an empty batch does.
  virtual void skip_training_step() {}
  virtual void set_random_state(const std::vector<std::uint64_t>& /*state*/) {}

 protected:
  std::vector<DeviceParameter> params_;
};

/// The device twin of `host`, built for per-sample input and output shapes (without the batch
/// axis). Throws ConfigError naming the layer when its class has no CUDA implementation.
std::unique_ptr<DeviceLayer> make_device_layer(const Layer& host, const Shape& input_shape,
                                               const Shape& output_shape, DeviceContext& ctx);

}  // namespace tandem::cuda
