// OnnxGraph: writes the nodes, weights and constants of one ONNX graph (onnx::GraphProto, the
// protobuf classes of Debian's libonnx-dev) for the exporter (onnx/onnx_export.hpp).
//
// Values carry their Keras meaning: a per-sample shape as Keras sees it (channels last), and
// whether the ONNX tensor holds it channels first instead (N, C, spatial...), the layout ONNX's
// Conv and pooling operators need. A value is moved between the two layouts only when an
// operator needs the other one (in_layout()), once per value, so a stack of convolutions,
// normalizations and activations runs channels first without a Transpose between its layers.
//
// Ownership: the graph proto is borrowed and must outlive the OnnxGraph. One thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::onnx_export {

/// One tensor of the graph, with a leading batch dimension of any size.
struct OnnxValue {
  std::string name;
  Shape shape;                  // Keras' per-sample shape (no batch), channels last
  bool channels_first = false;  // stored as (N, C, spatial...) (rank 3 and up only)

  /// The per-sample dimensions as stored (channels moved first when channels_first).
  std::vector<std::int64_t> stored_dims() const;
  /// The stored axis (batch = 0) of Keras' per-sample axis `keras_axis` (negative from the end).
  int stored_axis(int keras_axis) const;
};

/// A node being written: attributes are set through the chained setters.
class NodeBuilder {
 public:
  explicit NodeBuilder(onnx::NodeProto* node) : node_(node) {}
  NodeBuilder& attr(const std::string& name, std::int64_t value);
  NodeBuilder& attr(const std::string& name, float value);
  NodeBuilder& attr(const std::string& name, const std::string& value);
  NodeBuilder& attr(const std::string& name, const std::vector<std::int64_t>& values);
  NodeBuilder& attr(const std::string& name, const std::vector<std::string>& values);
  /// The node's (first) output.
  const std::string& output() const { return node_->output(0); }
  /// Gives the node one more output named `name` (a unique name: OnnxGraph::unique_name).
  NodeBuilder& add_output(const std::string& name);
  /// Output i (0: output()).
  const std::string& output(int i) const { return node_->output(i); }

 private:
  onnx::NodeProto* node_;
};

class OnnxGraph {
 public:
  explicit OnnxGraph(onnx::GraphProto& graph) : graph_(graph) {}

  /// A name not used yet in the graph, from `prefix` ("dense/MatMul", then "dense/MatMul_1").
  std::string unique_name(const std::string& prefix);
  /// Adds a float initializer of `dims` holding `values` (row-major); returns its name.
  std::string constant(const std::string& prefix, const std::vector<std::int64_t>& dims,
                       const std::vector<float>& values);
  /// The same, but an initializer made before with this prefix, dims and values is reused.
  std::string shared_constant(const std::string& prefix, const std::vector<std::int64_t>& dims,
                              const std::vector<float>& values);
  /// A float scalar (rank 0) and a 1-D int64 initializer (shapes, axes, pads).
  std::string scalar(const std::string& prefix, float value);
  std::string int64s(const std::string& prefix, const std::vector<std::int64_t>& values);
  /// Adds a node of `op` reading `inputs` (an empty name skips an optional input) with one
  /// output named from `prefix`.
  NodeBuilder node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::string& prefix);

  /// `value` in the requested layout: itself, or a Transpose of it (made once per value).
  OnnxValue in_layout(const OnnxValue& value, bool channels_first);
  /// A value computed from `from` by an element-wise node: same shape and layout.
  static OnnxValue like(const OnnxValue& from, const std::string& name) {
    return {name, from.shape, from.channels_first};
  }

 private:
  onnx::GraphProto& graph_;
  std::set<std::string> names_;  // every name handed out
  struct Shared {
    std::string name;
    std::vector<std::int64_t> dims;
    std::vector<float> values;
  };
  std::multimap<std::string, Shared> shared_;  // prefix -> initializers made for it
  std::map<std::pair<std::string, bool>, std::string> layouts_;  // (value, channels_first) -> copy
};

}  // namespace tandem::onnx_export

TANDEM_INTERNAL_API_END
