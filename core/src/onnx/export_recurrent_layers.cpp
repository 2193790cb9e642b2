// Exporters of the recurrent layers: ONNX's own RNN, LSTM and GRU operators (opset 7's, one
// direction), which every runtime maps to its fused kernels. Keras' batch-major sequences are
// transposed to ONNX's time-major ones and back; go_backwards feeds the steps in reverse (a
// Gather) and keeps the outputs in that order, as Keras returns them; the last step's output is
// Y's last row. Weights: each gate's block transposed to ONNX's (gates · units, features), LSTM's
// gates reordered from Keras' i, f, c, o to ONNX's i, o, f, c (the GRU's z, r, h are ONNX's
// order, its reset_after is linear_before_reset); Keras' one bias is ONNX's input bias, the
// recurrent bias zeros (the default GRU's second row; a GRU with reset_after false has none). A
// Bidirectional layer is ONNX's bidirectional direction.
#include "nn/stacked_rnn.hpp"
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

// One direction of an ONNX recurrent operator: its W, R and B in ONNX's layouts and its
// activations in ONNX's names, from a Keras layer of class `cls` whose weights are `weights`
// (kernel, recurrent kernel and, with use_bias, bias: Keras' order) and config `config`.
struct Direction {
  std::string op;  // RNN, LSTM or GRU
  std::int64_t units = 0, features = 0, gates = 0;
  std::vector<float> w, r, b;
  std::vector<std::string> activations;
  bool default_activations = true;
  bool linear_before_reset = true;  // GRU: Keras' reset_after
};

Direction direction(const LayerCall& call, const std::string& cls, const nlohmann::json& config,
                    const std::vector<Parameter*>& weights) {
  const Tensor& kernel = weights.at(0)->value;
  const Tensor& recurrent = weights.at(1)->value;
  Direction d;
  d.op = cls == "SimpleRNN" ? "RNN" : cls;
  d.units = recurrent.dim(0);
  d.features = kernel.dim(0);
  const std::vector<int> order = cls == "LSTM"  ? std::vector<int>{0, 3, 1, 2}
                                 : cls == "GRU" ? std::vector<int>{0, 1, 2}
                                                : std::vector<int>{0};
  d.gates = static_cast<std::int64_t>(order.size());
  d.linear_before_reset = config.value("reset_after", true);
  d.w = onnx_weight(kernel, d.units, order);
  d.r = onnx_weight(recurrent, d.units, order);

  // Activations: ONNX's defaults unless Keras' differ (f, g, h for LSTM; f, g for GRU; f).
  const nn::ActivationKind act = call.activation(config.value("activation", "tanh"));
  const nn::ActivationKind gate = call.activation(
      cls == "SimpleRNN" ? "sigmoid" : config.value("recurrent_activation", "sigmoid"));
  if (cls == "LSTM")
    d.activations = {onnx_activation(gate), onnx_activation(act), onnx_activation(act)};
  if (cls == "GRU") d.activations = {onnx_activation(gate), onnx_activation(act)};
  if (cls == "SimpleRNN") d.activations = {onnx_activation(act)};
  for (const std::string& a : d.activations)
    if (a.empty())
      call.refuse(
          "ONNX's recurrent operators take tanh, sigmoid, relu, softsign, softplus or "
          "Keras 2's hard_sigmoid as the cell's activations, not " +
          nn::activation_name(act) + " / " + nn::activation_name(gate));
  d.default_activations = act == nn::ActivationKind::tanh &&
                          (cls == "SimpleRNN" || gate == nn::ActivationKind::sigmoid);

  // Biases: [2 · gates · units], the input's then the recurrent's.
  const std::int64_t width = d.gates * d.units;
  d.b.assign(static_cast<std::size_t>(2 * width), 0.0f);
  if (weights.size() > 2) {
    const Tensor& b = weights[2]->value;
    for (std::int64_t row = 0; row < b.size() / width; ++row)
      for (std::int64_t k = 0; k < d.gates; ++k)
        for (std::int64_t u = 0; u < d.units; ++u)
          d.b[row * width + k * d.units + u] = b[row * width + order[k] * d.units + u];
  }
  return d;
}

// The call's input time-major ([steps, batch, features]), its steps reversed when `backwards`.
std::string time_major_input(LayerCall& call, bool backwards, std::int64_t& steps) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  steps = x.shape.at(0);
  std::string sequence =
      g.node("Transpose", {x.name}, p).attr("perm", std::vector<std::int64_t>{1, 0, 2}).output();
  if (!backwards) return sequence;
  std::vector<std::int64_t> reversed;
  for (std::int64_t t = steps - 1; t >= 0; --t) reversed.push_back(t);
  return g.node("Gather", {sequence, g.int64s(p + "/reversed", reversed)}, p)
      .attr("axis", std::int64_t{0})
      .output();
}

// The operator over `sequence` with one direction, or "bidirectional" with two (forward then
// reverse): Y [steps, directions, batch, units]. `initial`: the states to start from
// ([directions, batch, units] each: h, and the LSTM's c), or none (zeros); `final`, when given,
// receives the final states' names (Y_h, and the LSTM's Y_c).
std::string recurrent_node(LayerCall& call, const std::string& sequence,
                           const std::vector<Direction>& ds,
                           const std::vector<std::string>& initial = {},
                           std::vector<std::string>* final = nullptr) {
  OnnxGraph& g = call.graph;
  const Direction& d = ds.front();
  const auto n = static_cast<std::int64_t>(ds.size());
  std::vector<float> w, r, b;
  std::vector<std::string> activations;
  bool defaults = true;
  for (const Direction& one : ds) {
    w.insert(w.end(), one.w.begin(), one.w.end());
    r.insert(r.end(), one.r.begin(), one.r.end());
    b.insert(b.end(), one.b.begin(), one.b.end());
    activations.insert(activations.end(), one.activations.begin(), one.activations.end());
    defaults = defaults && one.default_activations;
  }
  const std::int64_t width = d.gates * d.units;
  std::vector<std::string> inputs{sequence, call.constant("W", {n, width, d.features}, w),
                                  call.constant("R", {n, width, d.units}, r),
                                  call.constant("B", {n, 2 * width}, b)};
  if (!initial.empty()) {
    inputs.push_back("");  // sequence_lens: every step
    inputs.insert(inputs.end(), initial.begin(), initial.end());
  }
  NodeBuilder node = g.node(d.op, inputs, call.prefix);
  if (final) {
    final->push_back(g.unique_name(call.prefix + "/Y_h"));
    node.add_output(final->back());
    if (d.op == "LSTM") {
      final->push_back(g.unique_name(call.prefix + "/Y_c"));
      node.add_output(final->back());
    }
  }
  node.attr("hidden_size", d.units);
  if (n == 2) node.attr("direction", std::string("bidirectional"));
  if (d.op == "GRU") {
    for (const Direction& one : ds)
      if (one.linear_before_reset != d.linear_before_reset)
        call.refuse(
            "its two directions apply the reset gate differently (reset_after), which "
            "ONNX's GRU cannot");
    node.attr("linear_before_reset", std::int64_t{d.linear_before_reset ? 1 : 0});
  }
  if (!defaults) node.attr("activations", activations);
  return node.output();
}

// Row `step` of Y's direction `which` ([steps, directions, batch, units]): [1, 1, batch, units].
std::string y_row(LayerCall& call, const std::string& y, std::int64_t step, std::int64_t which) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const std::string at = g.node("Gather", {y, g.int64s(p + "/step", {step})}, p)
                             .attr("axis", std::int64_t{0})
                             .output();
  return g.node("Gather", {at, g.int64s(p + "/direction", {which})}, p)
      .attr("axis", std::int64_t{1})
      .output();
}

// ONNX's recurrent operators skip steps only at the end of a sequence (sequence_lens); a Keras
// mask may leave out any step.
void refuse_masked(const LayerCall& call) {
  if (call.input_masked)
    call.refuse(
        "its input carries a mask (Embedding's mask_zero, a Masking layer), whose skipped "
        "steps Tandem's ONNX export does not write; export a model without the mask");
}

// The call's initial states (its inputs after the sequence) as ONNX takes them: [1, batch, units].
std::vector<std::string> initial_states(LayerCall& call) {
  OnnxGraph& g = call.graph;
  std::vector<std::string> states;
  for (std::size_t i = 1; i < call.inputs.size(); ++i)
    states.push_back(g.node("Unsqueeze",
                            {g.in_layout(call.inputs[i], false).name,
                             g.int64s(call.prefix + "/direction_axis", {0})},
                            call.prefix)
                         .output());
  return states;
}

// The layer's output `y` (of per-sample shape `shape`) and, with `states` ([batch, units] each,
// in the layer's order), them after it, packed as the layer packs its several outputs: each
// sample's values flattened, concatenated.
OnnxValue with_states(LayerCall& call, const std::string& y, const Shape& shape,
                      const std::vector<std::string>& states) {
  if (states.empty()) return {y, shape, false};
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  std::vector<std::string> parts{
      g.node("Reshape", {y, g.int64s(p + "/flat_rows", {0, -1})}, p).output()};
  parts.insert(parts.end(), states.begin(), states.end());
  return {g.node("Concat", parts, p).attr("axis", std::int64_t{1}).output(), call.output_shape,
          false};
}

// Direction `which` of each final state ([directions, batch, units]: Y_h, Y_c): [batch, units].
std::vector<std::string> direction_states(LayerCall& call, const std::vector<std::string>& final,
                                          std::int64_t which) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  std::vector<std::string> states;
  for (const std::string& state : final) {
    const std::string one = g.node("Gather", {state, g.int64s(p + "/which", {which})}, p)
                                .attr("axis", std::int64_t{0})
                                .output();
    states.push_back(g.node("Squeeze", {one, g.int64s(p + "/direction_axis", {0})}, p).output());
  }
  return states;
}

// The layer's own output shape (without return_state's states): Keras' output_parts()[0].
Shape main_output(const LayerCall& call, std::int64_t steps, std::int64_t width) {
  const nlohmann::json& config =
      call.config.contains("layer") ? call.config["layer"]["config"] : call.config;
  return config.value("return_sequences", false) ? Shape{steps, width} : Shape{width};
}

// A SimpleRNN, LSTM or GRU layer (`cls`) whose keys are call.config's.
OnnxValue export_recurrent_as(LayerCall& call, const std::string& cls) {
  refuse_masked(call);
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const Direction d = direction(call, cls, call.config, call.layer.parameters());
  std::int64_t steps = 0;
  const std::string sequence =
      time_major_input(call, call.config.value("go_backwards", false), steps);
  std::vector<std::string> final;
  std::string y = recurrent_node(call, sequence, {d}, initial_states(call), &final);
  const std::vector<std::string> states = call.config.value("return_state", false)
                                              ? direction_states(call, final, 0)
                                              : std::vector<std::string>{};
  const Shape shape = main_output(call, steps, d.units);
  if (!call.config.value("return_sequences", false)) {
    y = g.node("Reshape", {y_row(call, y, steps - 1, 0), g.int64s(p + "/rows", {-1, d.units})}, p)
            .output();
    return with_states(call, y, shape, states);
  }
  y = g.node("Reshape", {y, g.int64s(p + "/steps", {steps, -1, d.units})}, p).output();
  y = g.node("Transpose", {y}, p).attr("perm", std::vector<std::int64_t>{1, 0, 2}).output();
  return with_states(call, y, shape, states);
}

OnnxValue export_recurrent(LayerCall& call) {
  return export_recurrent_as(call, call.layer.class_name());
}

OnnxValue export_rnn(LayerCall& call);

// An RNN over StackedRNNCells: each cell's layer's nodes in turn, the first's output the
// second's input.
OnnxValue export_stacked_rnn(LayerCall& call, const nn::StackedRnn& stack) {
  OnnxValue x = call.inputs[0];
  for (std::size_t i = 0; i < stack.cells().size(); ++i) {
    nn::Recurrent& cell = *stack.cells()[i];
    LayerCall one{cell,
                  cell.config(),
                  {x},
                  cell.output_parts()[0],
                  call.prefix + "/cell" + std::to_string(i),
                  {},
                  nlohmann::json::object(),
                  call.graph,
                  call.keras2,
                  call.input_masked};
    x = export_rnn(one);
  }
  return x;
}

// A recurrent layer's class and config as its cell's layer's: an RNN over one cell is that
// cell's layer ("LSTMCell": LSTM), the cell's keys beside the RNN's; any other stays as it is.
struct CellLayer {
  std::string cls;
  nlohmann::json config;
};
CellLayer as_cell_layer(const std::string& cls, const nlohmann::json& config) {
  if (cls != "RNN") return {cls, config};
  const nlohmann::json& cell = config.at("cell");
  nlohmann::json merged = config;
  merged.update(cell.at("config"));
  const std::string cell_class = cell.at("class_name");
  return {cell_class.substr(0, cell_class.size() - std::string("Cell").size()), merged};
}

// Keras' RNN over a cell: its cell's layer's nodes; over StackedRNNCells, each cell's in turn.
OnnxValue export_rnn(LayerCall& call) {
  if (const auto* stack = dynamic_cast<const nn::StackedRnn*>(&call.layer))
    return export_stacked_rnn(call, *stack);
  CellLayer layer = as_cell_layer("RNN", call.config);
  call.config = std::move(layer.config);
  return export_recurrent_as(call, layer.cls);
}

// A Bidirectional's initial states as ONNX takes them: per state, the forward layer's and the
// backward layer's ([2, batch, units]; the call gives the forward layer's first, Keras' split).
std::vector<std::string> bidirectional_initial_states(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const std::vector<std::string> each = initial_states(call);  // [1, batch, units] each
  std::vector<std::string> states;
  for (std::size_t i = 0; i < each.size() / 2; ++i)
    states.push_back(g.node("Concat", {each[i], each[each.size() / 2 + i]}, p)
                         .attr("axis", std::int64_t{0})
                         .output());
  return states;
}

// The directions' outputs Y [steps, 2, batch, units] merged as `merge` says: [batch, steps,
// width] with return_sequences, else the last step's (the forward half's last row and the
// reverse half's first) [batch, width].
std::string merged_directions(LayerCall& call, const std::string& y, const std::string& merge,
                              bool sequences, std::int64_t steps, std::int64_t units) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const std::int64_t width = merge == "concat" ? 2 * units : units;
  if (sequences) {
    const std::string batch_major =
        g.node("Transpose", {y}, p).attr("perm", std::vector<std::int64_t>{2, 0, 1, 3}).output();
    if (merge == "concat")
      return g.node("Reshape", {batch_major, g.int64s(p + "/concat", {-1, steps, width})}, p)
          .output();
    const std::string op = merge == "sum"   ? "ReduceSum"
                           : merge == "ave" ? "ReduceMean"
                                            : "ReduceProd";
    NodeBuilder reduce = merge == "sum" ? g.node(op, {batch_major, g.int64s(p + "/axes", {2})}, p)
                                        : g.node(op, {batch_major}, p);
    if (merge != "sum") reduce.attr("axes", std::vector<std::int64_t>{2});
    reduce.attr("keepdims", std::int64_t{0});
    return reduce.output();
  }
  const std::string last = y_row(call, y, steps - 1, 0), first = y_row(call, y, 0, 1);
  std::string merged;
  if (merge == "concat") {
    merged = g.node("Concat", {last, first}, p).attr("axis", std::int64_t{3}).output();
  } else {
    merged = g.node(merge == "mul" ? "Mul" : "Add", {last, first}, p).output();
    if (merge == "ave") merged = g.node("Mul", {merged, g.scalar(p + "/half", 0.5f)}, p).output();
  }
  return g.node("Reshape", {merged, g.int64s(p + "/rows", {-1, width})}, p).output();
}

// Bidirectional: ONNX's "bidirectional" direction, whose reverse half is Keras' backward layer
// (Y aligned with the input's steps, as Keras aligns it; its last state Y's first row); the
// merge as ONNX operators over the directions' axis; with return_state the forward layer's
// final states, then the backward layer's, after the merged output.
OnnxValue export_bidirectional(LayerCall& call) {
  refuse_masked(call);
  const nlohmann::json& layer = call.config.at("layer");
  const CellLayer ahead_layer = as_cell_layer(layer.at("class_name"), layer.at("config"));
  const std::string& cls = ahead_layer.cls;
  const nlohmann::json& config = ahead_layer.config;
  const nlohmann::json back = call.config.contains("backward_layer")
                                  ? as_cell_layer(call.config["backward_layer"].at("class_name"),
                                                  call.config["backward_layer"].at("config"))
                                        .config
                                  : config;
  if (config.value("go_backwards", false))
    call.refuse("its forward layer runs backwards (go_backwards), which ONNX's directions do not");
  // The forward layer's weights, then the backward layer's (Bidirectional's order).
  const std::vector<Parameter*> weights = call.layer.parameters();
  const auto split = weights.begin() + (config.value("use_bias", true) ? 3 : 2);
  const Direction ahead = direction(call, cls, config, {weights.begin(), split});
  const Direction behind = direction(call, cls, back, {split, weights.end()});
  std::int64_t steps = 0;
  std::vector<std::string> final;
  const std::string y = recurrent_node(call, time_major_input(call, false, steps), {ahead, behind},
                                       bidirectional_initial_states(call), &final);
  const std::string merge = call.config.value("merge_mode", "concat");
  const bool sequences = config.value("return_sequences", false);
  const std::string merged = merged_directions(call, y, merge, sequences, steps, ahead.units);
  std::vector<std::string> states;
  if (config.value("return_state", false))
    for (std::int64_t which : {0, 1}) {
      const std::vector<std::string> one = direction_states(call, final, which);
      states.insert(states.end(), one.begin(), one.end());
    }
  return with_states(call, merged,
                     main_output(call, steps, merge == "concat" ? 2 * ahead.units : ahead.units),
                     states);
}

}  // namespace

void add_recurrent_exporters(ExporterTable& table) {
  for (const char* cls : {"SimpleRNN", "LSTM", "GRU"}) table[cls] = export_recurrent;
  table["RNN"] = export_rnn;
  table["Bidirectional"] = export_bidirectional;
}

}  // namespace tandem::onnx_export
