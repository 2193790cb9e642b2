#include "onnx/onnx_export.hpp"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include "onnx/layer_export.hpp"

namespace tandem::onnx_export {

namespace {

const ExporterTable& exporters() {
  static const ExporterTable table = [] {
    ExporterTable t;
    add_core_exporters(t);
    add_spatial_exporters(t);
    add_merge_exporters(t);
    add_recurrent_exporters(t);
    add_conv_lstm_exporters(t);
    return t;
  }();
  return table;
}

// A graph input or output: float, (batch, shape...).
void describe(onnx::ValueInfoProto* info, const std::string& name, const Shape& shape) {
  info->set_name(name);
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  auto* dims = tensor->mutable_shape();
  dims->add_dim()->set_dim_param("batch");
  for (std::int64_t d : shape) dims->add_dim()->set_dim_value(d);
}

// ONNX's checker and its strict shape inference (which also compares the inferred output shapes
// with the declared ones) on a copy of the model.
void check(const onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
    onnx::ModelProto inferred = model;
    onnx::ShapeInferenceOptions options{true, 1, false};  // check types, strict
    onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    throw RunError(std::string("the exported ONNX graph failed ONNX's own checks (a Tandem bug; "
                               "please report it): ") +
                   e.what());
  }
}

}  // namespace

const Tensor& LayerCall::weight(const std::string& name) const {
  for (Parameter* p : layer.parameters())
    if (p->name == name) return p->value;
  refuse("it has no weight '" + name + "'");
}

bool LayerCall::has_weight(const std::string& name) const {
  for (Parameter* p : layer.parameters())
    if (p->name == name) return true;
  return false;
}

// Output `part` of call k's value (outputs[k]): the value itself for a call of one output, else
// its columns of the packed rows (nn::SeveralOutputs) in the part's shape.
OnnxValue part_of(OnnxGraph& g, const Model& model, std::size_t k, int part,
                  const std::vector<OnnxValue>& outputs) {
  const std::vector<Shape>& parts = model.call_output_parts(k);
  if (parts.size() == 1) return outputs[k];
  std::int64_t start = 0;
  for (int j = 0; j < part; ++j) start += shape_size(parts[static_cast<std::size_t>(j)]);
  const Shape& shape = parts[static_cast<std::size_t>(part)];
  const std::string p = outputs[k].name + "/part" + std::to_string(part);
  const OnnxValue packed = g.in_layout(outputs[k], false);
  const std::string columns =
      g.node("Slice",
             {packed.name, g.int64s(p + "/starts", {start}),
              g.int64s(p + "/ends", {start + shape_size(shape)}), g.int64s(p + "/axes", {1})},
             p)
          .output();
  std::vector<std::int64_t> dims{-1};
  dims.insert(dims.end(), shape.begin(), shape.end());
  return {g.node("Reshape", {columns, g.int64s(p + "/shape", dims)}, p).output(), shape, false};
}

const LayerExporter& exporter_of(Layer& layer) {
  const auto exporter = exporters().find(layer.class_name());
  if (exporter == exporters().end())
    throw UnexportableLayer(layer, "Tandem has no ONNX form for " + layer.class_name());
  return exporter->second;
}

OnnxValue export_on_view(LayerCall& call, Layer& inner, const Shape& view,
                         const Shape& inner_output, const std::string& tag) {
  const OnnxValue rows = reshape_to(call.graph, call.inputs[0], view, call.prefix + "/view");
  LayerCall inner_call{
      inner, inner.config(),           {rows},     inner_output, call.prefix + "/" + tag,
      {},    nlohmann::json::object(), call.graph, call.keras2,  false};
  const OnnxValue y = exporter_of(inner)(inner_call);
  return reshape_to(call.graph, y, call.output_shape, call.prefix + "/out");
}

std::vector<std::string> exportable_classes() {
  std::vector<std::string> names;
  for (const auto& [name, exporter] : exporters()) names.push_back(name);
  return names;
}

OnnxModel export_onnx(Model& model, const std::map<std::string, std::string>& metadata) {
  onnx::ModelProto proto;
  proto.set_ir_version(onnx::IR_VERSION);
  proto.set_producer_name("tandem");
  proto.set_producer_version(TANDEM_VERSION);
  proto.set_model_version(1);
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  for (const auto& [k, v] : metadata) {
    auto* prop = proto.add_metadata_props();
    prop->set_key(k);
    prop->set_value(v);
  }
  onnx::GraphProto& graph_proto = *proto.mutable_graph();
  graph_proto.set_name(model.name());
  OnnxGraph graph(graph_proto);

  OnnxModel result;
  std::vector<OnnxValue> inputs;
  for (std::size_t i = 0; i < model.input_count(); ++i) {
    const std::string name =
        graph.unique_name(model.input_name(i).empty() ? "input" : model.input_name(i));
    describe(graph_proto.add_input(), name, model.input_shape(i));
    inputs.push_back({name, model.input_shape(i), false});
    result.input_names.push_back(name);
  }
  std::vector<std::string>& output_names = result.output_names;
  for (std::size_t j = 0; j < model.output_count(); ++j)
    output_names.push_back(graph.unique_name(model.output_name(j)));

  std::vector<OnnxValue> outputs;  // per call
  std::vector<int> later_calls(model.layer_count(), 0);
  for (std::size_t k = 0; k < model.call_count(); ++k) {
    Layer& layer = model.layer(model.call_layer(k));
    const LayerExporter& exporter = exporter_of(layer);
    const int number = model.call_number(k);
    LayerCall call{layer,
                   layer.config(),
                   {},
                   model.call_output_shape(k),
                   number == 0 ? layer.name() : layer.name() + "_" + std::to_string(number),
                   model.call_argument_names(k),
                   model.call_options(k),
                   graph,
                   model.keras2(),
                   model.call_input_masked(k)};
    for (std::size_t i = 0; i < model.call_inputs(k).size(); ++i) {
      const int in = model.call_inputs(k)[i];
      call.inputs.push_back(in < 0 ? inputs[static_cast<std::size_t>(-1 - in)]
                                   : part_of(graph, model, static_cast<std::size_t>(in),
                                             model.call_input_part(k, i), outputs));
    }
    outputs.push_back(exporter(call));
  }
  for (std::size_t j = 0; j < model.output_count(); ++j) {
    const OnnxValue y = graph.in_layout(
        part_of(graph, model, model.output_call(j), model.output_part(j), outputs), false);
    auto* node = graph_proto.add_node();
    node->set_op_type("Identity");
    node->set_name(output_names[j] + "/Identity");
    node->add_input(y.name);
    node->add_output(output_names[j]);
    describe(graph_proto.add_output(), output_names[j], model.output_shape(j));
  }
  check(proto);
  if (!proto.SerializeToString(&result.bytes))
    throw RunError("the ONNX model of '" + model.name() + "' could not be serialized (over 2 GiB?)");
  return result;
}

}  // namespace tandem::onnx_export
