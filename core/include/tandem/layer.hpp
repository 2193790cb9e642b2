// Layer: one step of a Sequential model, with explicit forward and backward passes.
//
// Shapes passed to and returned from build() exclude the batch dimension; tensors passed to
// forward()/backward() include it. forward() returns a reference to a buffer the layer owns and
// reuses from step to step (valid until the next forward on this layer); backward() likewise.
// A layer is used by one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/cross_replica_sum.hpp"
#include "tandem/parameter.hpp"
#include "tandem/rng.hpp"
#include "tandem/tensor.hpp"

namespace tandem {

namespace backend {
class Backend;
Backend& cpu_backend();
}  // namespace backend

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  /// Keras' `trainable`: when false the optimizer leaves this layer's parameters alone.
  bool trainable() const { return trainable_; }
  void set_trainable(bool trainable) { trainable_ = trainable; }
  /// The Keras class name, e.g. "Dense".
  virtual std::string class_name() const = 0;

  /// Creates the parameters for the given per-sample input shape, drawing initial values from
  /// `init`, and returns the per-sample output shape. Throws ShapeError naming the layer.
  virtual Shape build(const Shape& input_shape, Rng& init) = 0;
  /// x has shape (batch, input_shape...). `training` switches Dropout (and later BatchNorm).
  virtual const Tensor& forward(const Tensor& x, bool training) = 0;
  /// Given dL/d(output), accumulates nothing: it *sets* each parameter's grad to dL/dparam for
  /// this batch and, when `need_input_grad`, returns dL/dx (else an empty tensor).
  virtual const Tensor& backward(const Tensor& grad_output, bool need_input_grad) = 0;

  /// Trainable parameters first, then non-trainable, in Keras weight order.
  virtual std::vector<Parameter*> parameters() { return {}; }
  /// The Keras `get_config()` dictionary of this layer (with "name").
  virtual nlohmann::json config() const = 0;

  /// Handing a relu to the next layer (Model pairs adjacent layers after building). A layer whose
  /// output is relu(z) reports has_output_relu(); after set_output_relu_external(true) it outputs
  /// z, and its backward() receives dL/dz. The next layer takes the relu over when it can apply it
  /// on a smaller tensor: max pooling computes relu(max z) = max relu(z) on its pooled output and
  /// masks its pooled gradient by pooled output > 0 (each gradient lands on its window's maximum),
  /// exactly what the pair would compute otherwise, on a 4× smaller tensor for 2×2 windows.
  virtual bool has_output_relu() const { return false; }
  virtual void set_output_relu_external(bool /*external*/) {}
  virtual bool can_apply_input_relu() const { return false; }
  virtual void set_apply_input_relu(bool /*apply*/) {}

  /// Statistics over the whole global batch (synchronized BatchNormalization): the ReplicaModel
  /// gives every replica's layer the run's CrossReplicaSum (shared, outlives the layer's use) and
  /// the replica's index. Layers that need none ignore it.
  virtual bool wants_cross_replica_sum() const { return false; }
  virtual void set_cross_replica_sum(std::shared_ptr<CrossReplicaSum> /*sum*/, int /*replica*/) {}

  /// The backend the layer computes on (backend/ops.hpp): the CPU's unless a replica placed the
  /// layer on a device. Borrowed: the backend outlives the layer's use of it.
  backend::Backend& ops() const { return backend_ ? *backend_ : backend::cpu_backend(); }
  /// Places the layer's computation on `backend`; its parameters and buffers must then live on
  /// that backend's device (the caller places the parameters; buffers follow on their next use).
  void set_backend(backend::Backend& backend) { backend_ = &backend; }

  /// The layer's random state (Dropout), saved in checkpoints; empty when it has none.
  virtual std::vector<std::uint64_t> random_state() const { return {}; }
  virtual void set_random_state(const std::vector<std::uint64_t>& /*state*/) {}

  /// Where the rows of the next forward() sit in the global batch. A replica holding rows
  /// [offset, offset + n) of a batch draws the same random numbers for them as one model holding
  /// the whole batch, so randomness never depends on the device layout (contract 1).
  void set_sample_offset(std::int64_t offset) { sample_offset_ = offset; }
  std::int64_t sample_offset() const { return sample_offset_; }

 private:
  std::string name_;
  bool trainable_ = true;
  std::int64_t sample_offset_ = 0;
  backend::Backend* backend_ = nullptr;  // null: the CPU backend
};

}  // namespace tandem
