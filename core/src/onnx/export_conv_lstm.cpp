// The exporter of Keras' convolutional LSTMs (ConvLSTM1D/2D/3D): ONNX has no such operator, so
// the steps are unrolled (their count is fixed by the model) as Tandem computes them — per step
// the input's Conv (the layer's strides, dilation and padding, explicit pads) plus the recurrent
// Conv of h (strides 1, SAME; none at the first step when h starts at zero, the call's initial h
// and c otherwise), the four gates Sliced
// out in Keras' order (i, f, c, o), c = f·c + i·g and h = o·activation(c), channels first; every
// step's h Unsqueezed and Concatenated with return_sequences, in processing order.
#include <string>
#include <vector>

#include "nn/spatial.hpp"
#include "onnx/conv_nodes.hpp"
#include "onnx/layer_export.hpp"

namespace tandem::onnx_export {

namespace {

OnnxValue export_conv_lstm(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const nlohmann::json& cfg = call.config;
  const std::string& p = call.prefix;
  const OnnxValue x = g.in_layout(call.inputs[0], false);  // (N, steps, grid..., channels)
  const std::int64_t steps = x.shape[0], channels = x.shape.back();
  const Sizes grid(x.shape.begin() + 1, x.shape.end() - 1);
  const std::size_t rank = grid.size();
  const Tensor& kernel = call.weight("conv_lstm_cell/kernel");
  const Tensor& recurrent = call.weight("conv_lstm_cell/recurrent_kernel");
  const std::int64_t gates = kernel.dim(kernel.rank() - 1), filters = gates / 4;
  const Sizes taps(kernel.shape().begin(), kernel.shape().begin() + static_cast<long>(rank));
  const nn::Padding padding =
      cfg.value("padding", "valid") == "same" ? nn::Padding::same : nn::Padding::valid;
  const Sizes strides = sizes_of(cfg, "strides", 1, rank), dilation = sizes_of(cfg, "dilation_rate", 1, rank);
  const Window input_window = window_over(grid, taps, strides, dilation, padding);
  Sizes out;  // the output grid, which h keeps
  for (std::size_t a = 0; a < rank; ++a)
    out.push_back(nn::window_along(grid[a], taps[a], strides[a], dilation[a], padding).out);
  const Window recurrent_window =
      window_over(out, taps, Sizes(rank, 1), Sizes(rank, 1), nn::Padding::same);
  std::vector<std::string> input_weights{
      call.constant("kernel", weight_dims(gates, channels, taps), onnx_kernel(kernel))};
  if (call.has_weight("conv_lstm_cell/bias"))
    input_weights.push_back(
        call.constant("bias", {gates}, values_of(call.weight("conv_lstm_cell/bias"))));
  const std::string recurrent_weights =
      call.constant("recurrent_kernel", weight_dims(gates, filters, taps), onnx_kernel(recurrent));
  Shape state_shape(out.begin(), out.end());  // Keras' (grid..., filters), stored channels first
  state_shape.push_back(filters);
  Shape step_shape(grid.begin(), grid.end());
  step_shape.push_back(channels);
  Shape sliced_shape = step_shape;
  sliced_shape.insert(sliced_shape.begin(), 1);
  const nn::ActivationKind act = call.activation(cfg.value("activation", "tanh"));
  const nn::ActivationKind gate = call.activation(cfg.value("recurrent_activation", "sigmoid"));
  const auto through = [&](const std::string& v, nn::ActivationKind kind) {
    return apply_activation(g, {v, state_shape, true}, kind, p).name;
  };
  const bool backwards = cfg.value("go_backwards", false);
  std::string h, c;               // empty: zero
  if (call.inputs.size() == 3) {  // the call's initial h and c
    h = g.in_layout(call.inputs[1], true).name;
    c = g.in_layout(call.inputs[2], true).name;
  }
  std::vector<std::string> outputs;
  for (std::int64_t n = 0; n < steps; ++n) {
    const std::int64_t t = backwards ? steps - 1 - n : n;
    const std::string sliced =
        g.node("Slice", {x.name, g.int64s(p + "/t", {t}), g.int64s(p + "/t_end", {t + 1}),
                         g.int64s(p + "/time_axis", {1})},
               p)
            .output();
    const OnnxValue step = reshape_to(g, {sliced, sliced_shape, false}, step_shape, p);
    std::string z = conv_node(g, g.in_layout(step, true).name, input_weights, input_window, 1, p);
    if (!h.empty())
      z = g.node("Add", {z, conv_node(g, h, {recurrent_weights}, recurrent_window, 1, p)}, p)
              .output();
    std::string part[4];
    for (std::int64_t q = 0; q < 4; ++q)
      part[q] = g.node("Slice", {z, g.int64s(p + "/gate", {q * filters}),
                                 g.int64s(p + "/gate_end", {(q + 1) * filters}),
                                 g.int64s(p + "/channel_axis", {1})},
                       p)
                    .output();
    const std::string i = through(part[0], gate), f = through(part[1], gate);
    const std::string cell = through(part[2], act), o = through(part[3], gate);
    const std::string fresh = g.node("Mul", {i, cell}, p).output();
    c = c.empty() ? fresh
                  : g.node("Add", {g.node("Mul", {f, c}, p).output(), fresh}, p).output();
    h = g.node("Mul", {o, through(c, act)}, p).output();
    if (cfg.value("return_sequences", false))
      outputs.push_back(g.node("Unsqueeze", {h, g.int64s(p + "/step_axis", {2})}, p).output());
  }
  Shape sequence = state_shape;
  sequence.insert(sequence.begin(), steps);  // stored (N, filters, steps, grid...)
  const OnnxValue result =
      outputs.empty()
          ? OnnxValue{h, state_shape, true}
          : OnnxValue{g.node("Concat", outputs, p).attr("axis", std::int64_t{2}).output(), sequence,
                      true};
  if (!cfg.value("return_state", false)) return result;
  // With return_state: the output, the final h and c, each sample's values flattened (Keras'
  // layout) and concatenated, as the layer packs them.
  std::vector<std::string> parts;
  const OnnxValue packed[] = {result, {h, state_shape, true}, {c, state_shape, true}};
  for (const OnnxValue& v : packed)
    parts.push_back(
        g.node("Reshape", {g.in_layout(v, false).name, g.int64s(p + "/flat_rows", {0, -1})}, p)
            .output());
  return {g.node("Concat", parts, p).attr("axis", std::int64_t{1}).output(), call.output_shape,
          false};
}

}  // namespace

void add_conv_lstm_exporters(ExporterTable& table) {
  for (const char* cls : {"ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"}) table[cls] = export_conv_lstm;
}

}  // namespace tandem::onnx_export
