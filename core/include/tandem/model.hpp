// Model: a Sequential stack of layers, or a functional graph of them, built from a Keras JSON
// config ("Sequential"; "Functional" or "Model" with input_layers, output_layers and each layer's
// inbound_nodes). A Sequential model is the graph whose every layer takes the one before it.
// Either may hold whole models as layers (Keras' nested models: a backbone, a head, a siamese
// encoder called twice): their layers are the model's layers, called where the nested model is
// (nn/model_graph.hpp); the config, the summary and the weights files keep Keras' nesting.
//
// A functional model may have several inputs and outputs. The data then comes packed: a sample's
// x is one row holding every input's values, flattened, in input_layers order, and forward()
// gives one row per sample holding every output's values in output_layers order (forward_outputs
// gives them apart). With one input and one output, x and the output have their own shapes.
//
// The model owns its layers and their parameters. It is the "template" of docs/design.md: device
// agnostic, savable, the thing every replica is a copy of. Not thread-safe: one thread drives a
// model at a time (replicas are separate Model objects).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/export.hpp"
#include "tandem/layer.hpp"
#include "tandem/snapshot.hpp"
#include "tandem/tensor.hpp"

namespace tandem {

namespace backend {
class Sums;
}  // namespace backend
namespace nn {
struct ModelGraph;
struct InputCheck;
struct Scope;
struct ScopeMember;
class SequenceMasks;
}  // namespace nn

struct CheckpointData;

class TANDEM_EXPORT Model {
 public:
  /// The data's per-sample shape for each input, in input_layers order (Dataset::x_parts()),
  /// which from_config asks for (once, on its thread) only when the config leaves a dimension
  /// of an input null besides the batch axis (Keras' any length: `Input(shape=(None,))`): the
  /// model is then built for the data's lengths (nn/input_lengths.hpp). The argument is the
  /// inputs' shapes as the config declares them (kAnyLength where null), for a caller that has
  /// no data but chooses lengths. An empty function: no data, and such a config is refused
  /// naming the dimension.
  using DataInputShapes = std::function<std::vector<Shape>(const std::vector<Shape>& declared)>;

  /// Builds from {"class_name": "Sequential", "config": {"name": ..., "layers": [...]}} with the
  /// input shape from an InputLayer or the first layer's `input_shape`/`batch_input_shape`, or
  /// from a functional config in Keras 2's or Keras 3's form (any number of inputs and outputs;
  /// a shared layer is called more than once).
  /// Initial weights are drawn from `seed`; null lengths of the inputs from `data_shapes`.
  /// Throws ConfigError naming the JSON path (`path` is the path of `config` itself, e.g.
  /// "model"), ShapeError when the data does not fit an input whose lengths it gives.
  static std::unique_ptr<Model> from_config(const nlohmann::json& config, const std::string& path,
                                            std::uint64_t seed,
                                            const DataInputShapes& data_shapes = {});
  /// A new model with the same config and a copy of this one's weights.
  std::unique_ptr<Model> clone() const;

  const std::string& name() const { return name_; }
  /// A sample's x as forward() takes it: the input's shape, or {total values} for several
  /// inputs (packed, see above).
  const Shape& input_shape() const { return packed_input_shape_; }
  /// A sample's row of forward(): the output's shape, or {total values} for several outputs.
  const Shape& output_shape() const { return packed_output_shape_; }
  /// The inputs (InputLayers, in input_layers order; a Sequential model's one input is named
  /// "") and outputs (the output layers, in output_layers order), each with its sample shape.
  /// An output is named after its layer; where one layer gives several outputs (a shared layer's
  /// calls), the later ones are named as Keras names them: name_1, name_2, ...
  std::size_t input_count() const { return inputs_.size(); }
  const std::string& input_name(std::size_t i) const { return inputs_[i].name; }
  const Shape& input_shape(std::size_t i) const { return inputs_[i].shape; }
  /// Input i's shape as the config declares it: kAnyLength where it leaves the length to the
  /// data (input_shape(i) then has the data's).
  const Shape& declared_input_shape(std::size_t i) const { return inputs_[i].declared; }
  /// Whether some input took a length from the data (the config leaves one null).
  bool has_lengths_from_data() const;
  std::size_t output_count() const { return output_calls_.size(); }
  const std::string& output_name(std::size_t j) const;
  const Shape& output_shape(std::size_t j) const {
    return call_parts_[output_calls_[j]][static_cast<std::size_t>(output_parts_[j])];
  }
  std::size_t layer_count() const { return layers_.size(); }
  Layer& layer(std::size_t i) { return *layers_[i]; }
  const Layer& layer(std::size_t i) const { return *layers_[i]; }
  const Shape& layer_output_shape(std::size_t i) const { return output_shapes_[i + 1]; }
  /// True for a functional model (its config and summary say how the layers connect).
  bool functional() const { return functional_; }
  /// Whether the config names Keras 2 ("keras_version": "2.x"): its layers then follow Keras 2's
  /// definitions where Keras 3 changed them (hard_sigmoid, MultiHeadAttention's fully masked
  /// rows; nn/keras_generation.hpp).
  bool keras2() const { return keras2_; }
  /// The calls of the layers, in the order they run (topological; the last gives the output).
  /// A Sequential model calls layer i as call i; a functional model may call a layer more than
  /// once (a shared layer: the same weights, the gradients of its calls summed). Layers are
  /// numbered in the order of their first calls.
  std::size_t call_count() const { return calls_.size(); }
  /// The layer call k runs.
  std::size_t call_layer(std::size_t k) const { return calls_[k].layer; }
  /// What call k takes: the indices of the calls whose outputs it reads, in order, with
  /// model_input(i) for the model's input i (kModelInput for the first). Each index is < k.
  static constexpr int kModelInput = -1;
  static constexpr int model_input(std::size_t i) { return -1 - static_cast<int>(i); }
  const std::vector<int>& call_inputs(std::size_t k) const { return calls_[k].inputs; }
  /// Which output of its call call k's input i is (Keras' tensor index): 0, unless that call's
  /// layer gives several (a recurrent layer's return_state: its output, then its states).
  int call_input_part(std::size_t k, std::size_t i) const {
    return calls_[k].input_parts.empty() ? 0 : calls_[k].input_parts[i];
  }
  /// Call k's outputs, per sample: {call_output_shape(k)}, or the shapes of the several a layer
  /// gives, which its output holds packed (each sample's row every part's values in order, so
  /// call_output_shape(k) is {their total}; pipelines hand them over as one tensor).
  const std::vector<Shape>& call_output_parts(std::size_t k) const { return call_parts_[k]; }
  /// Which output of output_call(j) model output j is.
  int output_part(std::size_t j) const { return output_parts_[j]; }
  /// Call k's output shape (per sample), which of its layer's calls it is (0 for the first),
  /// the names of its arguments after the first input (MultiHeadAttention's "value", ...; empty
  /// for most layers) and its other keyword options (a JSON object).
  const Shape& call_output_shape(std::size_t k) const { return call_shapes_[k]; }
  int call_number(std::size_t k) const { return calls_[k].number; }
  const std::vector<std::string>& call_argument_names(std::size_t k) const {
    return calls_[k].argument_names;
  }
  const nlohmann::json& call_options(std::size_t k) const { return calls_[k].options; }
  /// Whether any of call k's inputs carries a Keras mask of padding steps (Embedding's
  /// mask_zero, a Masking layer), which its layer reads (nn/sequence_masks.hpp).
  bool call_input_masked(std::size_t k) const;
  /// The call giving output j.
  std::size_t output_call(std::size_t j) const { return output_calls_[j]; }
  /// Whether output j carries a Keras mask of its steps (nn/sequence_masks.hpp): its loss and
  /// metrics then weigh each step by it, as Keras does (nn/objective.hpp). Such an output is a
  /// sequence, (steps, features) per sample.
  bool output_masked(std::size_t j) const;
  bool any_output_masked() const;
  /// After a forward: output j's mask, (rows, steps) of 0/1 values on the output's backend, or
  /// null when it carries none. Owned by the model or a layer; valid until the next forward.
  const Tensor* output_mask(std::size_t j) const;
  /// The sum over every replica of the batch that the objective counts the masked outputs' kept
  /// steps with (the meta-model sets it on each replica's model when there are several, and an
  /// empty function again when it ends): every replica then divides by the global batch's count.
  /// Empty: this model alone. Set between steps, from the thread that owns the model.
  void set_mask_count_sum(std::function<void(double* values, std::size_t count)> sum) {
    mask_count_sum_ = std::move(sum);
  }
  const std::function<void(double*, std::size_t)>& mask_count_sum() const {
    return mask_count_sum_;
  }

  /// Runs the layers on x (see input_shape()); the returned reference is owned by the output
  /// layer or, with several outputs, by the model (valid until the next forward). `training`
  /// enables Dropout. `sample_offset`: where x's rows sit in the global batch when this model
  /// is one replica of several (see Layer::set_sample_offset).
  const Tensor& forward(const Tensor& x, bool training, std::int64_t sample_offset = 0);
  /// The same, giving each output apart, in output_layers order (owned by their layers).
  const std::vector<const Tensor*>& forward_outputs(const Tensor& x, bool training,
                                                    std::int64_t sample_offset = 0);
  /// Back-propagates dL/d(output) (shaped as forward()'s result), setting every parameter's
  /// grad.
  void backward(const Tensor& grad_output);
  /// The same, calling after_layer(i) for every layer from the last back, once layer i's
  /// gradients are set (a device replica starts summing them across replicas then).
  void backward(const Tensor& grad_output,
                const std::function<void(std::size_t layer)>& after_layer);
  /// The same from each output's gradient apart (as forward_outputs() gives the outputs; the
  /// tensors stay borrowed until it returns).
  void backward_outputs(const std::vector<const Tensor*>& grad_outputs,
                        const std::function<void(std::size_t layer)>& after_layer);

  /// One forward and backward in parts, for pipeline stages (parallel/pipeline_replica.cpp):
  /// start_forward(x), then forward_calls() for each part in turn, then forward_results() (the
  /// outputs, as forward_outputs() gives them); start_backward() with the outputs' gradients,
  /// then backward_calls() for each part in reverse order. A part is a list of calls in
  /// ascending order; together the parts hold every call once, and a call reads only the
  /// model's inputs and calls of its own or an earlier part. The parts may run on different
  /// threads, one at a time, each finished before the next begins; x and the gradients stay
  /// borrowed until the last part's backward returns.
  void start_forward(const Tensor& x);
  void forward_calls(const std::vector<std::size_t>& calls, bool training,
                     std::int64_t sample_offset);
  const std::vector<const Tensor*>& forward_results();
  void start_backward(const std::vector<const Tensor*>& grad_outputs);
  void backward_calls(const std::vector<std::size_t>& calls,
                      const std::function<void(std::size_t layer)>& after_layer);
  /// Parts on different devices hand tensors over: call_output(k) is call k's output in this
  /// forward (owned by its layer; null before the call ran), and after set_call_output(k, copy)
  /// the calls that have not run yet read `copy` (on their device; borrowed until the backward
  /// pass ends). In the backward pass, output_gradient(k) is the gradient of call k's output so
  /// far (summed over the readers that ran backward; null when none did), and after
  /// set_output_gradient(k, copy) call k and its other readers take `copy` (on call k's device,
  /// borrowed likewise). A gradient from a second reader is added on that reader's backend.
  const Tensor* call_output(std::size_t k) const { return outputs_.at(k); }
  void set_call_output(std::size_t k, const Tensor* copy) { outputs_.at(k) = copy; }
  const Tensor* output_gradient(std::size_t k) const { return output_grads_.at(k); }
  void set_output_gradient(std::size_t k, const Tensor* copy) { output_grads_.at(k) = copy; }

  /// Keras' activity regularizers (a layer's `activity_regularizer`): after a forward, queues
  /// each regularized call's penalty of its output, l1·Σ|y| + l2·Σy² over the rows it ran on,
  /// into `sums` (reset to that many slots, on the layers' backend, when there are any; the
  /// caller adds them to the loss sum of the rows). With `loss_scale` > 0 it also keeps
  /// loss_scale times the penalty's gradient, which the next backward adds to the output's
  /// gradient. The trainer's loss sum is divided by the batch size B and its loss_scale is 1/B,
  /// so the penalty counts as tf.keras 2 counts it: its sum over the batch divided by B. A
  /// Keras 3 model (keras2() false) adds the sum undivided, as Keras 3 does: its penalties are
  /// taken B times, B being set_penalty_batch_size()'s.
  void enqueue_activity_penalties(backend::Sums& sums, float loss_scale);
  /// The global batch of the steps to come (the meta-model sets it before each forward_backward
  /// and evaluate): a Keras 3 model's activity penalties are scaled by it (above). Default 1.
  void set_penalty_batch_size(std::int64_t rows) { penalty_batch_size_ = rows; }
  std::int64_t penalty_batch_size() const { return penalty_batch_size_; }
  /// Whether any layer has an activity regularizer.
  bool has_activity_regularizers() const;
  /// Keras' mixed dtype policy of layer i as its config named it ("mixed_bfloat16",
  /// "mixed_float16"), or "" when it computes in float32 (no dtype, or "float32").
  std::string layer_dtype_policy(std::size_t i) const;

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
  /// A Keras-like summary table with parameter counts: a nested model is one row; with
  /// `expand_nested` its layers follow it, as Keras' summary(expand_nested=True) shows them.
  std::string summary() const;
  std::string summary(bool expand_nested) const;

  /// Copies weights from another model of the same architecture.
  void copy_weights_from(const Model& other);
  /// Layer weights as plain data for a checkpoint, and back. save_weights lists the layers in
  /// Keras' order (a functional model's as Keras orders its graph, InputLayers included, not
  /// as its config lists them). load_weights pairs the file's layers with weights with the
  /// model's by name when the names are the same set (in any order), else — a Keras
  /// multi_gpu_model file, the template nested as one layer whose weights are named
  /// "<layer>/<weight>" — by the nested names, else by Keras' order as Keras' load_weights
  /// does; it checks counts and shapes and names the first mismatch (DataError). Returns "" when
  /// it paired by name, else a sentence for a warning that says how it paired them ("a
  /// multi_gpu_model file: loaded the weights of the template model nested as its layer
  /// 'sequential_1'", "...paired by order...").
  void save_weights(CheckpointData& out) const;  // Snapshot::copy
  void save_weights(CheckpointData& out, Snapshot snapshot) const;
  std::string load_weights(const CheckpointData& in, const std::string& source);

  /// Where Keras 3's weights files (.weights.h5, .keras) keep each layer's weights: the group
  /// under /layers named after the layer's class and its place among the model's layers of that
  /// class ("dense_1"), for every layer in Keras' order (a functional model's InputLayers among
  /// them), with the layer's name and class. load_weights pairs a Keras 3 file by these.
  struct Keras3Group {
    std::string group;
    std::string layer;
    std::string class_name;
  };
  std::vector<Keras3Group> keras3_groups() const;

 private:
  Model() = default;
  std::string name_;
  // An InputLayer: its name, config (null for a Sequential model given a shape by its first
  // layer), sample shape (kAnyLength where the config leaves a length null, until
  // take_lengths_from_data), the JSON path of its declaration and the shape declared there.
  struct Input {
    std::string name;
    nlohmann::json config;
    Shape shape;
    std::string path;
    Shape declared{};  // set by take_lengths_from_data
  };
  std::vector<Input> inputs_;
  std::vector<std::size_t> output_calls_;  // the calls giving the outputs, in order
  Shape packed_input_shape_, packed_output_shape_;
  // Reads the layers of a Sequential config without nested models, or the graph of any other
  // (nn/model_graph.hpp), into layers_, calls_ and inputs_.
  void read_sequential(const nlohmann::json& layers, const std::string& layers_path,
                       std::vector<std::string>& layer_paths);
  void read_graph(const nn::ModelGraph& graph, std::vector<std::string>& call_paths);
  // Keeps each input's declared shape and fills its null lengths from `data_shapes`.
  void take_lengths_from_data(const DataInputShapes& data_shapes);
  // Each nested model's InputLayer against the shape its call passes (after build_layers).
  void check_nested_inputs(const std::vector<nn::InputCheck>& checks) const;
  void check_output_masks(const std::vector<std::string>& call_paths) const;
  // Builds every layer on its inputs' shapes, then pairs relu hand-offs.
  void build_layers(std::uint64_t seed, const std::vector<std::string>& layer_paths);
  nlohmann::json functional_config() const;
  nlohmann::json sequential_config() const;
  // The config of a model with nested models: the source config, each layer's config replaced
  // by its own (layer_config), the rest as given.
  nlohmann::json nested_config() const;
  // Runs every call on x (split into inputs_ first when there are several).
  void run_calls(const Tensor& x, bool training, std::int64_t sample_offset);
  // Whether call `input`'s output needs a gradient in this backward pass.
  bool leads_to_training(int input) const;
  // The model's members in Keras' order (its model.layers, nn/keras_layer_order.hpp): layers,
  // a functional model's InputLayers, nested models (nn/model_graph.hpp).
  const nn::Scope& root_scope() const;
  // The weights Keras keeps for member m of scope s, in Keras' order (a nested model's: the
  // trainable ones of all its layers, then the others), each with its layer.
  struct MemberWeight {
    Layer* layer;
    Parameter* parameter;
  };
  std::vector<MemberWeight> member_weights(std::size_t scope, std::size_t m) const;
  // A member's name and class as Keras lists it ("encoder", "Functional").
  std::string member_name(const nn::ScopeMember& member) const;
  std::string member_class(const nn::ScopeMember& member) const;
  // Every layer of scope `scope` (nested models' too) with where a Keras 3 weights file keeps its
  // weights inside the group of the member that holds it: `prefix` + "layers/<group>/".
  std::vector<std::pair<Layer*, std::string>> keras3_layers_of(std::size_t scope,
                                                               const std::string& prefix) const;
  // Adds `grad` to the gradient of call k's output in this backward pass, on `ops` (the
  // backend of the call the gradient came from: where it lives): the gradient of output `part`
  // of a call of several outputs (into its columns of the packed gradient), else of the whole.
  void add_output_grad(std::size_t k, const Tensor* grad, backend::Backend& ops, int part = -1);
  // The shape of output `part` of call `value` (a model input's for a negative value), the
  // reader `reader` naming it at `path` (ConfigError for an output the call does not give).
  const Shape& value_shape(int value, int part, const std::string& reader,
                           const std::string& path) const;
  // Output `part` of call k's packed output `packed` (several outputs) copied into `into`.
  const Tensor& take_part(const Tensor& packed, std::size_t k, int part, Tensor& into,
                          backend::Backend& ops) const;
  // Where output `part` of call k starts in its packed rows.
  std::int64_t part_offset(std::size_t k, int part) const;

  // One call of a layer. A layer's first call runs the layer itself; a later call of a shared
  // layer runs a twin (made from the same config) whose weights are the layer's own tensors.
  struct Call {
    std::size_t layer = 0;
    Layer* runner = nullptr;  // layers_[layer], or a twin in twins_
    std::vector<int> inputs;  // see call_inputs()
    int number = 0;           // which of the layer's calls (Keras' node index)
    // Per input after the first argument's: its call argument's name ("value"); empty for
    // most layers. And the call's other keyword arguments (use_causal_mask).
    std::vector<std::string> argument_names;
    nlohmann::json options = nlohmann::json::object();
    // The mode it runs in whatever the model's (Keras 2's explicit `training`); none: the model's.
    std::optional<bool> training;
    std::vector<int> input_parts{};  // see call_input_part(); empty: every input's part 0
  };
  // A twin's weights are the layer's own tensors and it computes on the layer's backend.
  void sync_twin(const Call& call);
  // Adds the gradients of layer l's later calls to its own, once all of them ran backward.
  void sum_twin_gradients(std::size_t layer, const std::vector<bool>& ran);

  bool functional_ = false;
  bool keras2_ = false;                         // see keras2()
  std::vector<std::unique_ptr<Layer>> layers_;  // in the order of their first calls
  std::vector<std::unique_ptr<Layer>> twins_;   // runners of shared layers' later calls
  std::vector<Call> calls_;                     // topological
  std::vector<std::vector<std::size_t>> calls_of_layer_;  // per layer, its calls in order
  std::vector<Shape> output_shapes_;  // [0] = input 0's shape, [i+1] = layer i's first call's output
  std::vector<Shape> call_shapes_;    // per call, its output shape
  std::vector<std::vector<Shape>> call_parts_;  // per call, its outputs (see call_output_parts)
  std::vector<int> output_parts_;               // per model output, see output_part()
  // A part of a call of several outputs as a reader takes it (per call, per input), and each
  // model output that is one; a part's gradient added into its columns (scratch).
  std::vector<std::vector<Tensor>> input_part_values_;
  std::vector<Tensor> output_part_values_;
  Tensor part_gradient_;
  // One step's working state: each call's output (owned by its runner), each output's gradient
  // (a runner's, or grad_sums_[k] where several calls read output k), the input list of a call.
  std::vector<const Tensor*> outputs_, output_grads_;
  std::vector<Tensor> grad_sums_;
  std::vector<const Tensor*> call_inputs_;
  std::vector<std::size_t> all_calls_;  // 0 .. call_count() - 1
  Tensor forward_input_;                // x of this forward (shares its storage)
  // Per call, in this backward pass: its layer trains, something before it trains, it ran.
  std::vector<bool> backward_trainable_, backward_needs_input_grad_, backward_ran_;
  // Several inputs or outputs: each input's rows split from x, the outputs and their packed
  // rows, the packed gradient split per output.
  std::vector<Tensor> input_parts_, output_grad_parts_;
  std::vector<const Tensor*> model_outputs_;
  Tensor packed_output_;
  std::uint64_t seed_ = 0;
  nlohmann::json source_config_;
  // The layers that run functions called on Keras tensors (nn/function_layers.hpp): each one's
  // name with the function ("tf.math.multiply").
  nlohmann::json function_layers_ = nlohmann::json::object();
  // The entries of Tandem's own layers (TandemIndexing, TandemReduction: functions called on
  // Keras tensors that no Keras layer computes) as the config gave them, by layer name: written
  // back as given.
  nlohmann::json given_function_entries_ = nlohmann::json::object();
  // Per layer, Keras' activity regularizer (config null: none); per call, the penalty gradient
  // the next backward adds (pending after enqueue_activity_penalties with a loss scale).
  struct ActivityRegularizer {
    float l1 = 0, l2 = 0;
    nlohmann::json config;
  };
  std::vector<ActivityRegularizer> activity_;
  std::vector<nlohmann::json> dtype_policies_;  // per layer, a mixed dtype policy (null: none)
  std::vector<Tensor> activity_grads_;
  bool activity_grads_pending_ = false;
  // A layer's config as written back: its own, with its activity regularizer.
  nlohmann::json layer_config(std::size_t i) const;
  std::vector<std::string> output_names_;  // per output, unique (output_name)
  // What Keras names each output after: the layer or nested model output_layers names.
  std::vector<std::string> output_layers_;
  // The model (scopes_[0]) and the models nested in it (nn/model_graph.hpp): read once, shared
  // by nothing else (a shared_ptr only because the type is private to the engine).
  std::shared_ptr<const std::vector<nn::Scope>> scopes_;
  // Keras' masks through the calls (nn/sequence_masks.hpp); null when no call's output has one.
  std::shared_ptr<nn::SequenceMasks> masks_;
  std::function<void(double*, std::size_t)> mask_count_sum_;  // see set_mask_count_sum()
  std::int64_t penalty_batch_size_ = 1;    // set_penalty_batch_size()
};

}  // namespace tandem
