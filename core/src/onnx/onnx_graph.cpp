#include "onnx/onnx_graph.hpp"

#include <algorithm>

namespace tandem::onnx_export {

std::vector<std::int64_t> OnnxValue::stored_dims() const {
  std::vector<std::int64_t> dims(shape.begin(), shape.end());
  if (channels_first) std::rotate(dims.rbegin(), dims.rbegin() + 1, dims.rend());
  return dims;
}

int OnnxValue::stored_axis(int keras_axis) const {
  const int rank = static_cast<int>(shape.size());
  const int axis = keras_axis < 0 ? keras_axis + rank : keras_axis;  // per sample
  if (!channels_first) return axis + 1;
  return axis == rank - 1 ? 1 : axis + 2;
}

NodeBuilder& NodeBuilder::attr(const std::string& name, std::int64_t value) {
  auto* a = node_->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
  return *this;
}

NodeBuilder& NodeBuilder::attr(const std::string& name, float value) {
  auto* a = node_->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
  return *this;
}

NodeBuilder& NodeBuilder::attr(const std::string& name, const std::string& value) {
  auto* a = node_->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
  return *this;
}

NodeBuilder& NodeBuilder::attr(const std::string& name, const std::vector<std::int64_t>& values) {
  auto* a = node_->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (std::int64_t v : values) a->add_ints(v);
  return *this;
}

NodeBuilder& NodeBuilder::attr(const std::string& name, const std::vector<std::string>& values) {
  auto* a = node_->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const std::string& v : values) a->add_strings(v);
  return *this;
}

std::string OnnxGraph::unique_name(const std::string& prefix) {
  std::string name = prefix;
  for (int i = 1; names_.count(name); ++i) name = prefix + "_" + std::to_string(i);
  names_.insert(name);
  return name;
}

std::string OnnxGraph::constant(const std::string& prefix, const std::vector<std::int64_t>& dims,
                                const std::vector<float>& values) {
  auto* t = graph_.add_initializer();
  t->set_name(unique_name(prefix));
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (std::int64_t d : dims) t->add_dims(d);
  t->set_raw_data(values.data(), values.size() * sizeof(float));  // little-endian, as ONNX's
  return t->name();
}

std::string OnnxGraph::shared_constant(const std::string& prefix,
                                       const std::vector<std::int64_t>& dims,
                                       const std::vector<float>& values) {
  const auto [first, last] = shared_.equal_range(prefix);
  for (auto it = first; it != last; ++it)
    if (it->second.dims == dims && it->second.values == values) return it->second.name;
  const std::string name = constant(prefix, dims, values);
  shared_.insert({prefix, {name, dims, values}});
  return name;
}

std::string OnnxGraph::scalar(const std::string& prefix, float value) {
  return constant(prefix, {}, {value});
}

std::string OnnxGraph::int64s(const std::string& prefix, const std::vector<std::int64_t>& values) {
  auto* t = graph_.add_initializer();
  t->set_name(unique_name(prefix));
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<std::int64_t>(values.size()));
  for (std::int64_t v : values) t->add_int64_data(v);
  return t->name();
}

NodeBuilder& NodeBuilder::add_output(const std::string& name) {
  node_->add_output(name);
  return *this;
}

NodeBuilder OnnxGraph::node(const std::string& op, const std::vector<std::string>& inputs,
                            const std::string& prefix) {
  auto* n = graph_.add_node();
  n->set_op_type(op);
  n->set_name(unique_name(prefix + "/" + op));
  for (const auto& in : inputs) n->add_input(in);
  n->add_output(n->name());
  return NodeBuilder(n);
}

OnnxValue OnnxGraph::in_layout(const OnnxValue& value, bool channels_first) {
  if (value.channels_first == channels_first || value.shape.size() < 2) {
    OnnxValue same = value;
    same.channels_first = value.channels_first && value.shape.size() >= 2;
    return same;
  }
  auto& made = layouts_[{value.name, channels_first}];
  if (made.empty()) {
    // (N, s1..sk, C) <-> (N, C, s1..sk)
    const auto rank = static_cast<std::int64_t>(value.shape.size()) + 1;
    std::vector<std::int64_t> perm{0};
    if (channels_first) {
      perm.push_back(rank - 1);
      for (std::int64_t a = 1; a < rank - 1; ++a) perm.push_back(a);
    } else {
      for (std::int64_t a = 2; a < rank; ++a) perm.push_back(a);
      perm.push_back(1);
    }
    made = node("Transpose", {value.name}, value.name).attr("perm", perm).output();
  }
  return {made, value.shape, channels_first};
}

}  // namespace tandem::onnx_export
