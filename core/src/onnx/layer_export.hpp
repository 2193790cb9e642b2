// How one layer call becomes ONNX nodes: the exporter of each Keras class (by class name), and
// what it is given. The exporters are grouped by family in export_*_layers.cpp; the model walk is
// onnx/onnx_export.cpp's.
//
// An exporter writes inference behaviour: Dropout, noise and augmentation layers are the
// identity, BatchNormalization uses its moving statistics. It throws UnexportableLayer for a
// configuration ONNX (opset 13) cannot express.
// Ownership: everything in a LayerCall is borrowed for the exporter's call. One thread.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/activation_fn.hpp"
#include "onnx/onnx_export.hpp"
#include "onnx/onnx_graph.hpp"
#include "tandem/error.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::onnx_export {

struct LayerCall {
  Layer& layer;
  nlohmann::json config;           // layer.config()
  std::vector<OnnxValue> inputs;   // in the order of the layer's list forms
  Shape output_shape;              // Keras' per-sample output shape of this call
  std::string prefix;              // names this call's nodes: the layer's name ("_1" for a later call)
  std::vector<std::string> argument_names;  // per input after the first: its call argument
  nlohmann::json options;          // the call's keyword options (use_causal_mask)
  OnnxGraph& graph;
  bool keras2 = false;  // the model follows Keras 2's definitions (Model::keras2())
  bool input_masked = false;  // an input carries a Keras mask (Model::call_input_masked)

  /// The activation `name` names in this model (hard_sigmoid: Keras 2's in a Keras 2 model).
  nn::ActivationKind activation(const std::string& name) const {
    const nn::ActivationKind kind = nn::parse_activation(name, "activation");
    return keras2 ? nn::keras2_definition(kind) : kind;
  }

  /// The layer's weight `name` ("kernel") as an initializer in Keras' layout, or its values.
  const Tensor& weight(const std::string& name) const;
  /// A float initializer of this layer (its weight `tag` in ONNX's layout, or a constant made
  /// from its config), named "<layer>/<tag>": every call of a shared layer reads the same one
  /// (a new one only if a call needs other values).
  std::string constant(const std::string& tag, const std::vector<std::int64_t>& dims,
                       const std::vector<float>& values) const {
    return graph.shared_constant(layer.name() + "/" + tag, dims, values);
  }
  bool has_weight(const std::string& name) const;
  /// Throws UnexportableLayer with `why`.
  [[noreturn]] void refuse(const std::string& why) const { throw UnexportableLayer(layer, why); }
};

using LayerExporter = std::function<OnnxValue(LayerCall&)>;
using ExporterTable = std::map<std::string, LayerExporter>;

/// The exporter of `layer`'s class (onnx_export.cpp's table); throws UnexportableLayer naming
/// the layer when Tandem has none.
const LayerExporter& exporter_of(Layer& layer);

/// A layer that computes through another on a view of its input (TimeDistributed's steps as
/// rows, a 1-D layer's 2-D view): the input reshaped to `view` (the inner layer's per-sample
/// input), `inner`'s own nodes (named under the call's prefix + "/" + `tag`), and their output
/// (per-sample `inner_output`) reshaped to the call's output shape.
OnnxValue export_on_view(LayerCall& call, Layer& inner, const Shape& view,
                         const Shape& inner_output, const std::string& tag);

/// Each family adds its classes' exporters.
void add_core_exporters(ExporterTable& table);     // Dense, activations, shapes, normalizations,
                                                   // TimeDistributed
void add_spatial_exporters(ExporterTable& table);  // convolutions, pooling, image geometry
void add_merge_exporters(ExporterTable& table);    // merging layers, Dot, MultiHeadAttention
void add_recurrent_exporters(ExporterTable& table);  // SimpleRNN, LSTM, GRU, Bidirectional
void add_conv_lstm_exporters(ExporterTable& table);  // ConvLSTM1D, ConvLSTM2D, ConvLSTM3D

/// `x` through Keras activation `kind` (linear: x itself); softmax and log_softmax over the last
/// Keras axis.
OnnxValue apply_activation(OnnxGraph& graph, const OnnxValue& x, nn::ActivationKind kind,
                           const std::string& prefix);
/// A constant that broadcasts one value per channel (Keras' last axis) over `like`, in its
/// layout: dims (C) channels last, (C, 1, ..., 1) channels first.
std::string channel_constant(OnnxGraph& graph, const OnnxValue& like, const std::string& prefix,
                             const std::vector<float>& per_channel);
/// A tensor's values.
inline std::vector<float> values_of(const Tensor& t) { return {t.data(), t.data() + t.size()}; }
/// x / Sqrt(Max(ReduceSum(x · x) over `axes` (ONNX's, the batch's 0), `square_floor`)): Keras'
/// L2 normalization (UnitNormalization; Dot's normalize), the tensor name.
std::string l2_normalized(OnnxGraph& graph, const std::string& x,
                          const std::vector<std::int64_t>& axes, float square_floor,
                          const std::string& prefix);
/// `x` (channels last) reshaped to Keras' per-sample `shape`, batch kept.
OnnxValue reshape_to(OnnxGraph& graph, const OnnxValue& x, const Shape& shape,
                     const std::string& prefix);

}  // namespace tandem::onnx_export

TANDEM_INTERNAL_API_END
