// Layer: one step of a model (Sequential or functional), with explicit forward and backward passes.
//
// Shapes passed to and returned from build() exclude the batch dimension; tensors passed to
// forward()/backward() include it. forward() returns a reference to a buffer the layer owns and
// reuses from step to step (valid until the next forward on this layer); backward() likewise.
// A layer is used by one thread at a time.
//
// Ownership: a Model owns its layers; a layer owns its parameters and buffers. Through a ModelView
// a plugin sees the template model's layers (names, classes, configs, parameters): it may read
// them during a hook, and change weights only through ModelView::load_weights.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/export.hpp"
#include "tandem/parameter.hpp"
#include "tandem/rng.hpp"
#include "tandem/tensor.hpp"

namespace tandem {

namespace backend {
class Backend;
TANDEM_EXPORT Backend& cpu_backend();
}  // namespace backend

class TANDEM_EXPORT Layer {
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

  /// Layers that take several inputs (the merging layers: Add, Concatenate, ...) say so and
  /// override the three list forms below; every other layer takes one input and keeps the
  /// defaults, which call the one-input forms. A functional model calls the list forms.
  virtual bool takes_several_inputs() const { return false; }
  /// build() for `input_shapes` (one per input, in the order of the layer's inbound tensors).
  virtual Shape build_inputs(const std::vector<Shape>& input_shapes, Rng& init);
  /// forward() on `inputs` (borrowed for the call; the layer may keep them until its backward).
  virtual const Tensor& forward_inputs(const std::vector<const Tensor*>& inputs, bool training);
  /// backward(), returning dL/d(input i) for every input when `need_input_grad` (each a tensor
  /// the layer owns, or grad_output itself, valid until the layer's next backward), else none.
  virtual std::vector<const Tensor*> backward_inputs(const Tensor& grad_output,
                                                     bool need_input_grad);

  /// Trainable parameters first, then non-trainable, in Keras weight order.
  virtual std::vector<Parameter*> parameters() { return {}; }
  /// The Keras `get_config()` dictionary of this layer (with "name").
  virtual nlohmann::json config() const = 0;

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
