// Private (CUDA module): one stage of a CUDA pipeline replica (cuda_pipeline_replica.cpp) — the
// GPU it computes on, with its streams, backend and the parameters of its layers — and the
// hand-off between two neighbouring stages of one micro-batch slot.
//
// Hand-offs are pulled: the stage that needs a tensor (the next stage an activation, the
// previous one a gradient) allocates the copy on its own GPU and queues cudaMemcpyPeerAsync on
// its own copy stream (one for activations, one for gradients, so neither waits behind the
// other), behind an event of the stage that computed the tensor and behind the last use of the
// slot's buffer, and its compute stream waits for the copy's event. A buffer that had to grow
// (a block of the allocator's cache, which only the compute stream's order protects) also waits
// for the compute queued so far. So every stage's thread touches only its own GPU's allocator
// and streams, and copies overlap the compute of the other micro-batches.
//
// Ownership: a Stage owns its streams, allocator, backends, parameters and scratch (destroyed
// after its streams drained); a HandOff owns its copies and events. Thread-safety: a stage's
// objects are used by its pipeline worker, or by the replica's thread while the workers wait.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "cuda/backend/cuda_backend.hpp"
#include "cuda/ops/cuda_handles.hpp"
#include "cuda/ops/dense_gemm.hpp"
#include "cuda/ops/device_allocator.hpp"
#include "cuda/replica/device_parameters.hpp"
#include "tandem/tensor.hpp"

namespace tandem::cuda {

struct PipelineStage {
  /// The stage's GPU `device` (made current), its backend at `precision` and, with
  /// `float_layers`, a float32 sibling for the layers a Keras dtype policy keeps at float32.
  PipelineStage(int device, Precision precision, bool float_layers);
  PipelineStage(const PipelineStage&) = delete;
  PipelineStage& operator=(const PipelineStage&) = delete;

  int device;
  CudaStream stream;             // the stage's compute
  CudaStream activation_copies;  // the activations it pulls from the previous stage
  CudaStream gradient_copies;    // the gradients it pulls from the next stage
  CudaEvent compute_tail;        // recorded where a copy must wait for the compute queued so far
  std::shared_ptr<DeviceAllocator> allocator;
  DenseGemm gemm;
  CudaBackend backend;
  std::unique_ptr<DenseGemm> float_gemm;         // for float_backend: null without it
  std::unique_ptr<CudaBackend> float_backend;    // the float32 layers of a mixed model
  std::unique_ptr<DeviceParameters> parameters;  // its layers' weights, gradients, slots
  Tensor scratch;  // one micro-batch's gradients, laid out as parameters->gradients()
  std::unique_ptr<backend::Sums> penalty_sums;  // its layers' weight penalties
};

/// Boundary b of one slot: stage b hands activations to stage b + 1, which hands gradients back.
/// Events are made on their recording stage's GPU: the caller makes each current in turn.
struct HandOff {
  std::vector<Tensor> activations;                  // on stage b + 1's GPU, one per hand-off call
  std::vector<Tensor> gradients;                    // on stage b's GPU, likewise
  std::unique_ptr<CudaEvent> forward_computed;      // stage b: the slot's forward queued
  std::unique_ptr<CudaEvent> activations_received;  // stage b + 1: its copies done
  std::unique_ptr<CudaEvent> backward_computed;     // stage b + 1: the slot's backward queued
  std::unique_ptr<CudaEvent> gradients_received;    // stage b: its copies done
};

/// Queues on `stream` (of `dst_device`, current) the copy of `src` (on `src_device`) into `dst`,
/// which is placed on `backend` (dst_device's) at src's shape first.
void copy_between_devices(const Tensor& src, int src_device, Tensor& dst, int dst_device,
                          CudaBackend& backend, cudaStream_t stream);

/// Lets each GPU of `devices` read the memory of its neighbours in the list directly (peer access,
/// where the hardware allows it; copies go through the host otherwise).
void enable_neighbour_access(const std::vector<int>& devices);

}  // namespace tandem::cuda
