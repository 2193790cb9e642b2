// Exporters of the recurrent layers: ONNX's own RNN, LSTM and GRU operators (opset 7's, one
// direction), which every runtime maps to its fused kernels. Keras' batch-major sequences are
// transposed to ONNX's time-major ones and back; go_backwards feeds the steps in reverse (a
// Gather) and keeps the outputs in that order, as Keras returns them; the last step's output is
// Y's last row. Weights: each gate's block transposed to ONNX's (gates · units, features), LSTM's
// gates reordered from Keras' i, f, c, o to ONNX's i, o, f, c (the GRU's z, r, h are ONNX's
// order, its reset_after is linear_before_reset); Keras' one bias is ONNX's input bias, the
// recurrent bias zeros (the GRU's second row).
#include "onnx/layer_export.hpp"

namespace tandem::onnx_export {

namespace {

// ONNX's name of a Keras activation in a recurrent operator, or "" when it has none.
std::string onnx_activation(nn::ActivationKind kind) {
  switch (kind) {
    case nn::ActivationKind::tanh:
      return "Tanh";
    case nn::ActivationKind::sigmoid:
      return "Sigmoid";
    case nn::ActivationKind::relu:
      return "Relu";
    case nn::ActivationKind::softsign:
      return "Softsign";
    case nn::ActivationKind::softplus:
      return "Softplus";
    case nn::ActivationKind::hard_sigmoid_keras2:  // clip(0.2 x + 0.5, 0, 1): ONNX's defaults
      return "HardSigmoid";
    default:
      return "";
  }
}

// ONNX's W or R ([1, gates · units, columns]) from a Keras kernel (columns, gates · units), the
// gates taken in `order` (Keras' gate index per ONNX gate).
std::vector<float> onnx_weight(const Tensor& kernel, std::int64_t units,
                               const std::vector<int>& order) {
  const std::int64_t columns = kernel.dim(0), width = kernel.dim(1);
  std::vector<float> out(static_cast<std::size_t>(columns * width));
  for (std::size_t g = 0; g < order.size(); ++g)
    for (std::int64_t u = 0; u < units; ++u)
      for (std::int64_t c = 0; c < columns; ++c)
        out[(static_cast<std::int64_t>(g) * units + u) * columns + c] =
            kernel[c * width + order[g] * units + u];
  return out;
}

OnnxValue export_recurrent(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const std::string cls = call.layer.class_name();
  const std::string cell = cls == "LSTM"  ? "lstm_cell"
                           : cls == "GRU" ? "gru_cell"
                                          : "simple_rnn_cell";
  const Tensor& kernel = call.weight(cell + "/kernel");
  const Tensor& recurrent = call.weight(cell + "/recurrent_kernel");
  const std::int64_t units = recurrent.dim(0), features = kernel.dim(0);
  const std::vector<int> order = cls == "LSTM"  ? std::vector<int>{0, 3, 1, 2}
                                 : cls == "GRU" ? std::vector<int>{0, 1, 2}
                                                : std::vector<int>{0};
  const auto gates = static_cast<std::int64_t>(order.size());

  // Activations: ONNX's defaults unless Keras' differ (f, g, h for LSTM; f, g for GRU; f).
  const nlohmann::json& config = call.config;
  const nn::ActivationKind act = call.activation(config.value("activation", "tanh"));
  const nn::ActivationKind gate = call.activation(
      cls == "SimpleRNN" ? "sigmoid" : config.value("recurrent_activation", "sigmoid"));
  std::vector<std::string> activations;
  if (cls == "LSTM")
    activations = {onnx_activation(gate), onnx_activation(act), onnx_activation(act)};
  if (cls == "GRU") activations = {onnx_activation(gate), onnx_activation(act)};
  if (cls == "SimpleRNN") activations = {onnx_activation(act)};
  for (const std::string& a : activations)
    if (a.empty())
      call.refuse(
          "ONNX's recurrent operators take tanh, sigmoid, relu, softsign, softplus or "
          "Keras 2's hard_sigmoid as the cell's activations, not " +
          nn::activation_name(act) + " / " + nn::activation_name(gate));

  // Biases: [1, 2 · gates · units], the input's then the recurrent's.
  std::vector<float> bias(static_cast<std::size_t>(2 * gates * units), 0.0f);
  if (call.has_weight(cell + "/bias")) {
    const Tensor& b = call.weight(cell + "/bias");
    const std::int64_t width = gates * units, rows = b.size() / width;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t k = 0; k < gates; ++k)
        for (std::int64_t u = 0; u < units; ++u)
          bias[r * width + k * units + u] = b[r * width + order[k] * units + u];
  }

  const OnnxValue x = g.in_layout(call.inputs[0], false);
  const std::int64_t steps = x.shape.at(0);
  std::string sequence =
      g.node("Transpose", {x.name}, p).attr("perm", std::vector<std::int64_t>{1, 0, 2}).output();
  if (config.value("go_backwards", false)) {
    std::vector<std::int64_t> reversed;
    for (std::int64_t t = steps - 1; t >= 0; --t) reversed.push_back(t);
    sequence = g.node("Gather", {sequence, g.int64s(p + "/reversed", reversed)}, p)
                   .attr("axis", std::int64_t{0})
                   .output();
  }
  const std::string op = cls == "SimpleRNN" ? "RNN" : cls;
  NodeBuilder node =
      g.node(op,
             {sequence,
              call.constant("W", {1, gates * units, features}, onnx_weight(kernel, units, order)),
              call.constant("R", {1, gates * units, units}, onnx_weight(recurrent, units, order)),
              call.constant("B", {1, 2 * gates * units}, bias)},
             p);
  node.attr("hidden_size", units);
  if (cls == "GRU") node.attr("linear_before_reset", std::int64_t{1});
  const bool defaults = act == nn::ActivationKind::tanh &&
                        (cls == "SimpleRNN" || gate == nn::ActivationKind::sigmoid);
  if (!defaults) node.attr("activations", activations);
  std::string y = node.output();  // Y: [steps, 1, batch, units]
  if (!config.value("return_sequences", false)) {
    y = g.node("Gather", {y, g.int64s(p + "/last", {steps - 1})}, p)
            .attr("axis", std::int64_t{0})
            .output();
    y = g.node("Reshape", {y, g.int64s(p + "/rows", {-1, units})}, p).output();
    return {y, call.output_shape, false};
  }
  y = g.node("Reshape", {y, g.int64s(p + "/steps", {steps, -1, units})}, p).output();
  y = g.node("Transpose", {y}, p).attr("perm", std::vector<std::int64_t>{1, 0, 2}).output();
  return {y, call.output_shape, false};
}

}  // namespace

void add_recurrent_exporters(ExporterTable& table) {
  for (const char* cls : {"SimpleRNN", "LSTM", "GRU"}) table[cls] = export_recurrent;
}

}  // namespace tandem::onnx_export
