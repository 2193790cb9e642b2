// The exporter of Keras' convolutional LSTMs (ConvLSTM1D/2D/3D): ONNX has no such operator, so
// the steps are unrolled (their count is fixed by the model) as Tandem computes them — per step
// the input's Conv (the layer's strides, dilation and padding, explicit pads) plus the recurrent
// Conv of h (strides 1, SAME; none at the first step, whose h is zero), the four gates Sliced
// out in Keras' order (i, f, c, o), c = f·c + i·g and h = o·activation(c), channels first; every
// step's h Unsqueezed and Concatenated with return_sequences, in processing order.
#include <string>
#include <vector>

#include "nn/spatial.hpp"
#include "onnx/layer_export.hpp"

namespace tandem::onnx_export {

namespace {

using Sizes = std::vector<std::int64_t>;

Sizes sizes_of(const nlohmann::json& config, const char* key, std::size_t rank) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return Sizes(rank, 1);
  if (it->is_number_integer()) return Sizes(rank, it->get<std::int64_t>());
  return it->get<Sizes>();
}

// Keras' kernel (taps..., in, out) as ONNX's Conv weights (out, in, taps...).
std::vector<float> conv_weights(const Tensor& kernel) {
  const std::int64_t in = kernel.dim(kernel.rank() - 2), out = kernel.dim(kernel.rank() - 1);
  const std::int64_t taps = kernel.size() / (in * out);
  std::vector<float> w(static_cast<std::size_t>(kernel.size()));
  for (std::int64_t t = 0; t < taps; ++t)
    for (std::int64_t i = 0; i < in; ++i)
      for (std::int64_t o = 0; o < out; ++o) w[(o * in + i) * taps + t] = kernel[(t * in + i) * out + o];
  return w;
}

struct ConvWindow {
  Sizes kernel, strides, dilation, pads;  // pads: every axis' before, then every axis' after
};

// The window over `grid` with explicit pads; the output grid in `out`.
ConvWindow window(const Sizes& grid, const Sizes& kernel, const Sizes& strides,
                  const Sizes& dilation, nn::Padding padding, Sizes& out) {
  ConvWindow w{kernel, strides, dilation, Sizes(2 * grid.size(), 0)};
  out.clear();
  for (std::size_t a = 0; a < grid.size(); ++a) {
    const nn::Window along =
        nn::window_along(grid[a], kernel[a], strides[a], dilation[a], padding);
    w.pads[a] = along.pad_before;
    w.pads[a + grid.size()] = along.pad_after;
    out.push_back(along.out);
  }
  return w;
}

std::string conv(OnnxGraph& g, const std::string& x, const std::vector<std::string>& weights,
                 const ConvWindow& w, const std::string& prefix) {
  std::vector<std::string> inputs{x};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  return g.node("Conv", inputs, prefix)
      .attr("kernel_shape", w.kernel)
      .attr("strides", w.strides)
      .attr("dilations", w.dilation)
      .attr("pads", w.pads)
      .output();
}

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
  Sizes out, same_out;
  const ConvWindow input_window =
      window(grid, taps, sizes_of(cfg, "strides", rank), sizes_of(cfg, "dilation_rate", rank),
             cfg.value("padding", "valid") == "same" ? nn::Padding::same : nn::Padding::valid,
             out);
  const ConvWindow recurrent_window =
      window(out, taps, Sizes(rank, 1), Sizes(rank, 1), nn::Padding::same, same_out);
  auto dims = [&](std::int64_t a, std::int64_t b) {
    Sizes d{a, b};
    d.insert(d.end(), taps.begin(), taps.end());
    return d;
  };
  std::vector<std::string> input_weights{
      call.constant("kernel", dims(gates, channels), conv_weights(kernel))};
  if (call.has_weight("conv_lstm_cell/bias"))
    input_weights.push_back(
        call.constant("bias", {gates}, values_of(call.weight("conv_lstm_cell/bias"))));
  const std::string recurrent_weights =
      call.constant("recurrent_kernel", dims(gates, filters), conv_weights(recurrent));
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
  std::string h, c;
  std::vector<std::string> outputs;
  for (std::int64_t n = 0; n < steps; ++n) {
    const std::int64_t t = backwards ? steps - 1 - n : n;
    const std::string sliced =
        g.node("Slice", {x.name, g.int64s(p + "/t", {t}), g.int64s(p + "/t_end", {t + 1}),
                         g.int64s(p + "/time_axis", {1})},
               p)
            .output();
    const OnnxValue step = reshape_to(g, {sliced, sliced_shape, false}, step_shape, p);
    std::string z = conv(g, g.in_layout(step, true).name, input_weights, input_window, p);
    if (!h.empty())
      z = g.node("Add", {z, conv(g, h, {recurrent_weights}, recurrent_window, p)}, p).output();
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
  if (outputs.empty()) return {h, state_shape, true};
  Shape sequence = state_shape;
  sequence.insert(sequence.begin(), steps);  // stored (N, filters, steps, grid...)
  return {g.node("Concat", outputs, p).attr("axis", std::int64_t{2}).output(), sequence, true};
}

}  // namespace

void add_conv_lstm_exporters(ExporterTable& table) {
  for (const char* cls : {"ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"}) table[cls] = export_conv_lstm;
}

}  // namespace tandem::onnx_export
