// Model: a Sequential stack of layers, or a functional graph of them, built from a Keras JSON
// config ("Sequential"; "Functional" or "Model" with input_layers, output_layers and each layer's
// inbound_nodes). A Sequential model is the graph whose every layer takes the one before it.
//
// The model owns its layers and their parameters. It is the "template" of docs/design.md: device
// agnostic, savable, the thing every replica is a copy of. Not thread-safe: one thread drives a
// model at a time (replicas are separate Model objects).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/export.hpp"
#include "tandem/layer.hpp"
#include "tandem/tensor.hpp"

namespace tandem {

struct CheckpointData;

class TANDEM_EXPORT Model {
 public:
  /// Builds from {"class_name": "Sequential", "config": {"name": ..., "layers": [...]}} with the
  /// input shape from an InputLayer or the first layer's `input_shape`/`batch_input_shape`, or
  /// from a functional config in Keras 2's or Keras 3's form (one input, one output; each layer
  /// called once).
  /// Initial weights are drawn from `seed`. Throws ConfigError naming the JSON path (`path` is
  /// the path of `config` itself, e.g. "model").
  static std::unique_ptr<Model> from_config(const nlohmann::json& config, const std::string& path,
                                            std::uint64_t seed);
  /// A new model with the same config and a copy of this one's weights.
  std::unique_ptr<Model> clone() const;

  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return output_shapes_.back(); }
  std::size_t layer_count() const { return layers_.size(); }
  Layer& layer(std::size_t i) { return *layers_[i]; }
  const Layer& layer(std::size_t i) const { return *layers_[i]; }
  const Shape& layer_output_shape(std::size_t i) const { return output_shapes_[i + 1]; }
  /// True for a functional model (its config and summary say how the layers connect).
  bool functional() const { return functional_; }
  /// What layer i takes: the indices of the layers whose outputs it reads, in order, with
  /// kModelInput for the model's input. Layers are in topological order, so each index is < i.
  static constexpr int kModelInput = -1;
  const std::vector<int>& layer_inputs(std::size_t i) const { return inputs_[i]; }

  /// Runs the layers; the returned reference is owned by the last layer (valid until the next
  /// forward). `training` enables Dropout. `sample_offset`: where x's rows sit in the global
  /// batch when this model is one replica of several (see Layer::set_sample_offset).
  const Tensor& forward(const Tensor& x, bool training, std::int64_t sample_offset = 0);
  /// Back-propagates dL/d(output), setting every parameter's grad.
  void backward(const Tensor& grad_output);
  /// The same, calling after_layer(i) for every layer from the last back, once layer i's
  /// gradients are set (a device replica starts summing them across replicas then).
  void backward(const Tensor& grad_output,
                const std::function<void(std::size_t layer)>& after_layer);

  /// All parameters in layer order, trainable ones of each layer first (Keras weight order).
  std::vector<Parameter*> parameters();
  /// The parameters the optimizer updates (of trainable layers only).
  std::vector<Parameter*> trainable_parameters();
  /// "dense_1/kernel" for parameter i of parameters().
  std::vector<std::string> parameter_names() const;
  std::int64_t count_params() const;
  std::int64_t count_trainable_params() const;

  /// The Keras model_config: {"class_name": "Sequential", "config": {...}}.
  nlohmann::json config() const;
  /// A Keras-like summary table with parameter counts.
  std::string summary() const;

  /// Copies weights from another model of the same architecture.
  void copy_weights_from(const Model& other);
  /// Layer weights as plain data for a checkpoint, and back. load_weights checks that layer
  /// names, counts and shapes match and names the first mismatch (DataError).
  void save_weights(CheckpointData& out) const;
  void load_weights(const CheckpointData& in, const std::string& source);

 private:
  Model() = default;
  std::string name_;
  nlohmann::json input_layer_config_;
  Shape input_shape_;
  // Reads the layers of a Sequential or a functional config (into layers_ and inputs_).
  void read_sequential(const nlohmann::json& layers, const std::string& layers_path,
                       std::vector<std::string>& layer_paths);
  void read_functional(const nlohmann::json& config, const std::string& path,
                       std::vector<std::string>& layer_paths);
  // Builds every layer on its inputs' shapes, then pairs relu hand-offs.
  void build_layers(std::uint64_t seed, const std::vector<std::string>& layer_paths);
  nlohmann::json functional_config() const;
  // The name of what a layer reads (kModelInput: the InputLayer's).
  std::string input_name_of(int input) const;
  // Adds `grad` to the gradient of layer i's output in this backward pass.
  void add_output_grad(std::size_t i, const Tensor* grad);

  bool functional_ = false;
  std::string input_name_;  // functional: the InputLayer's name
  std::vector<std::unique_ptr<Layer>> layers_;  // in topological order
  std::vector<std::vector<int>> inputs_;        // per layer: see layer_inputs()
  std::vector<Shape> output_shapes_;  // [0] = input shape, [i+1] = output of layer i
  // One step's working state: each layer's output (owned by the layer), each output's gradient
  // (a layer's, or grad_sums_[i] where several layers read output i), the input list of a call.
  std::vector<const Tensor*> outputs_, output_grads_;
  std::vector<Tensor> grad_sums_;
  std::vector<const Tensor*> call_inputs_;
  std::uint64_t seed_ = 0;
  nlohmann::json source_config_;
};

}  // namespace tandem
