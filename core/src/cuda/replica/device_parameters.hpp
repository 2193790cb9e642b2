// Private (CUDA module): where a CUDA replica's parameters and optimizer state live on its GPU.
//
// Every parameter of the device model is a view into one flat device tensor of values, trainable
// ones first (in trainable_parameters() order), each starting on a 256-byte boundary (cuBLASLt's
// preferred alignment; the gaps stay zero); the gradients and each optimizer slot are flat
// tensors of the same layout as the trainable part, so one fused optimizer launch and one
// all-reduce cover every parameter.
//
// Ownership: owns the flat tensors (device memory of the backend's allocator); the device
// model's parameters and the update tensors are views into them, valid while this object lives.
// Borrows the backend. Thread-safety: one thread at a time (the replica's).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/ops.hpp"
#include "optim/optimizer.hpp"
#include "tandem/model.hpp"

namespace tandem::cuda {

/// Offsets into the flat tensors (see above), for the parameters of some of the model's layers
/// (all of them for a whole replica; a pipeline stage's for a stage).
struct ParameterLayout {
  std::vector<std::int64_t> offsets;  // per parameter, in Model::parameters() order; -1: not here
  std::vector<bool> trainable;        // per parameter: among trainable_parameters() and here
  // Per trainable parameter here, its index in trainable_parameters().
  std::vector<std::size_t> trainable_index;
  std::vector<std::int64_t> segments;  // those trainable tensors' offsets, then the trainable total
  std::int64_t trainable_floats = 0;   // the trainable part, with alignment gaps
  std::int64_t total_floats = 0;
};

/// The layout of the parameters of `layers` (ascending layer indices) of `model`.
ParameterLayout plan_layout(Model& model, const std::vector<std::size_t>& layers);
/// Every layer's.
ParameterLayout plan_layout(Model& model);

class DeviceParameters {
 public:
  /// Allocates the flat tensors on `backend`'s device (zeroed) and rebinds the parameters of
  /// `layers` of `device_model` (those layers computing on `backend`) as views into them, with
  /// `slot_count` optimizer slots per trainable parameter. Values are left zero: push() fills
  /// them. Without `layers`: every layer.
  DeviceParameters(Model& device_model, std::size_t slot_count, backend::Backend& backend);
  DeviceParameters(Model& device_model, const std::vector<std::size_t>& layers,
                   std::size_t slot_count, backend::Backend& backend);
  DeviceParameters(const DeviceParameters&) = delete;
  DeviceParameters& operator=(const DeviceParameters&) = delete;

  const ParameterLayout& layout() const { return layout_; }
  /// Every trainable gradient here, flat (trainable_floats elements, gaps included).
  Tensor& gradients() { return gradients_; }
  /// What the fused optimizer update reads and writes, per trainable parameter here.
  const std::vector<backend::UpdateTensors>& update_tensors() const { return update_tensors_; }

  /// Queues on `stream` the copies of the host model's weights (of these layers) and the host
  /// optimizer's slots (zero when it has none yet) to the device. The caller synchronizes
  /// before the host changes.
  void push(Model& host, Optimizer& optimizer, cudaStream_t stream);
  /// Queues on `stream` the copies of the device's weights and slots into the host model and
  /// optimizer (creating its slots when it has none). The caller synchronizes before reading.
  void pull(Model& host, Optimizer& optimizer, cudaStream_t stream) const;

 private:
  backend::Backend& backend_;
  ParameterLayout layout_;
  Tensor values_, grads_;                        // flat (see above)
  Tensor gradients_;                             // grads_'s trainable part
  std::vector<Tensor> slots_;                    // flat optimizer slots
  std::vector<std::vector<Tensor>> slot_views_;  // per trainable parameter
  std::vector<backend::UpdateTensors> update_tensors_;
};

}  // namespace tandem::cuda
