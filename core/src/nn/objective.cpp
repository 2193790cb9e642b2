#include "nn/objective.hpp"

#include <cmath>
#include <span>
#include <sstream>
#include <stdexcept>

#include "backend/kernel_math.hpp"
#include "backend/ops.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem {

namespace {

using nlohmann::json;

bool sparse(const Loss& loss) {
  return loss.desc().kind == backend::LossDesc::Kind::scce;
}

// Values per sample of a batch tensor (every axis but the first).
std::int64_t row_width(const Tensor& t) {
  std::int64_t w = 1;
  for (int a = 1; a < t.rank(); ++a) w *= t.dim(a);
  return w;
}

// Values per sample of the targets of an output (a batch tensor): one class index per position
// for the sparse loss, else one per output value.
std::int64_t target_width(const Loss& loss, const Tensor& output) {
  return sparse(loss) ? positions_of_batch(output) : row_width(output);
}

// A loss or metric as the backends compute it on `output` (its positions set).
template <class Desc>
Desc at_positions(Desc desc, const Tensor& output) {
  desc.positions = positions_of_batch(output);
  return desc;
}

std::string at_index(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::string output_list(const Model& model) {
  std::string names;
  for (std::size_t j = 0; j < model.output_count(); ++j)
    names += (j ? ", '" : "'") + model.output_name(j) + "'";
  return names;
}

// A per-output setting: `spec` as it is for every output, or (`per_output` true) its entry for
// each output, by position in a list or by name in an object. Every name of an object must be
// an output's; an output an object leaves out gets nullptr. Returns (value, JSON path) pairs.
std::vector<std::pair<const json*, std::string>> per_output_entries(const json& spec,
                                                                    bool per_output,
                                                                    const std::string& path,
                                                                    const Model& model) {
  const std::size_t n = model.output_count();
  std::vector<std::pair<const json*, std::string>> out(n, {nullptr, path});
  if (!per_output) {
    for (auto& e : out) e.first = &spec;
    return out;
  }
  if (spec.is_array()) {
    if (spec.size() != n)
      throw ConfigError(path, "has " + std::to_string(spec.size()) + " entries for the model's " +
                                  std::to_string(n) + " outputs (" + output_list(model) + ")");
    for (std::size_t j = 0; j < n; ++j) out[j] = {&spec[j], at_index(path, j)};
    return out;
  }
  for (const auto& [name, value] : spec.items()) {
    std::size_t j = 0;
    while (j < n && model.output_name(j) != name) ++j;
    if (j == n)
      throw ConfigError(path + "." + name, "the model has no output '" + name +
                                               "' (its outputs: " + output_list(model) + ")");
    out[j] = {&value, path + "." + name};
  }
  return out;
}

// Each output's metric list of `metrics` (at `key`): a plain list is every output's; a list of
// lists (several outputs) or an object gives each output its own.
std::vector<std::pair<const json*, std::string>> metric_lists(const json& metrics,
                                                              const std::string& key,
                                                              const Model& model) {
  bool per_output = metrics.is_object();
  if (metrics.is_array() && model.output_count() > 1 && !metrics.empty()) {
    per_output = true;
    for (const json& m : metrics) per_output = per_output && m.is_array();
  }
  if (!metrics.is_null() && !metrics.is_array() && !metrics.is_object())
    throw ConfigError(key,
                      "expected a list of metric names, or lists by output, got " + metrics.dump());
  return per_output_entries(metrics, per_output, key, model);
}

// The weights after the `cols` target values of each of `y`'s `rows` rows: 0 (the targets
// alone), 1 (the sample's weight) or `positions` (> 1: one per position of a model's one output,
// Keras' temporal weights; 0 for a model of several outputs); ShapeError otherwise.
std::int64_t weight_columns(const Tensor& y, std::int64_t rows, std::int64_t cols,
                            std::int64_t positions) {
  if (y.size() == rows * cols) return 0;
  if (y.size() == rows * (cols + 1)) return 1;
  if (positions > 1 && y.size() == rows * (cols + positions)) return positions;
  const std::string per_position =
      positions > 1 ? ", or " + std::to_string(positions) + " more, one per position" : "";
  throw ShapeError("targets " + shape_to_string(y.shape()) + " do not fit predictions of " +
                   std::to_string(rows) + " samples (" + std::to_string(cols) +
                   " target values each, or one more with the sample's weight" + per_position +
                   ")");
}

// Values per sample of the targets of `columns` (without a weight).
std::int64_t target_columns(const std::vector<LabelColumn>& columns) {
  std::int64_t cols = 0;
  for (const LabelColumn& c : columns) cols += c.sparse ? c.positions : c.width;
  return cols;
}

// Objective::check_labels and label_check: the first sparse label of host targets `y` that is
// no class index, named by place(samples[row]), or as the batch's row.
void check_label_columns(const std::vector<LabelColumn>& columns, const Tensor& y,
                         std::span<const std::int64_t> samples, const SamplePlace& place) {
  const std::int64_t rows = y.rank() > 0 ? y.dim(0) : 0;
  std::int64_t cols = target_columns(columns);
  cols += weight_columns(y, rows, cols, columns.size() == 1 ? columns[0].positions : 0);
  std::int64_t offset = 0;
  for (const LabelColumn& c : columns) {
    for (std::int64_t r = 0; c.sparse && r < rows; ++r)
      for (std::int64_t p = 0; p < c.positions; ++p) {
        const float label = y[r * cols + offset + p];
        if (backend::math::sparse_label(label, c.classes) >= 0 || label == c.ignored) continue;
        std::ostringstream value;
        value << label;
        const std::string where = samples.empty() ? "row " + std::to_string(r) + " of the batch"
                                                  : place(samples[static_cast<std::size_t>(r)]);
        const std::string position = c.positions > 1 ? " at position " + std::to_string(p) +
                                                           " of " + std::to_string(c.positions)
                                                     : "";
        const std::string output = c.output.empty() ? "" : " for output '" + c.output + "'";
        throw DataError(where + ": label " + value.str() + position + output +
                        " is not a class index in [0, " + std::to_string(c.classes) + ") (" +
                        c.loss + " takes integer class indices)");
      }
    offset += c.sparse ? c.positions : c.width;
  }
}

double read_weight(const json& w, const std::string& path) {
  if (!w.is_number() || !std::isfinite(w.get<double>()) || w.get<double>() < 0)
    throw ConfigError(path, "expected a finite weight >= 0, got " + w.dump());
  return w.get<double>();
}

}  // namespace

Objective Objective::borrowing(const Loss& loss,
                               const std::vector<std::unique_ptr<Metric>>& metrics, bool masked) {
  Objective o;
  Output out;
  out.loss = &loss;
  out.masked = masked;
  for (const auto& m : metrics) out.metrics.push_back(m.get());
  o.outputs_.push_back(std::move(out));
  return o;
}

Objective::Objective(std::vector<Output> outputs, std::vector<std::unique_ptr<Loss>> losses,
                     std::vector<std::unique_ptr<Metric>> metrics)
    : outputs_(std::move(outputs)), losses_(std::move(losses)), metrics_(std::move(metrics)) {
  if (outputs_.empty()) throw std::logic_error("an objective without outputs");
  for (const Output& o : outputs_)
    if (!o.loss) throw std::logic_error("an objective output without a loss");
}

bool Objective::has_weighted_metrics() const {
  for (const Output& o : outputs_)
    if (!o.weighted_metrics.empty()) return true;
  return false;
}

std::size_t Objective::masked_count() const {
  std::size_t n = 0;
  for (const Output& o : outputs_) n += o.masked ? 1 : 0;
  return n;
}

std::vector<Objective::OrderedMetric> Objective::metrics_in_order() const {
  std::vector<OrderedMetric> all;
  for (const bool weighted : {false, true})
    for (std::size_t j = 0; j < outputs_.size(); ++j)
      for (const Metric* m : weighted ? outputs_[j].weighted_metrics : outputs_[j].metrics)
        all.push_back({m, weighted, j});
  return all;
}

// Slots: the outputs' losses; every output's metrics, then every output's weighted metrics (a
// ratio metric takes two, a histogram its bins); the weights' sum when there are weighted
// metrics; then each masked output's kept steps (mask_slots()).
std::size_t Objective::mask_slots() const {
  std::size_t n = outputs_.size();
  for (const auto& [m, weighted, j] : metrics_in_order())
    n += m->histogram() ? m->parts() : m->ratio() ? 2 : 1;
  return n + (has_weighted_metrics() ? 1 : 0);
}

std::size_t Objective::slot_count() const {
  return mask_slots() + masked_count() * (has_weighted_metrics() ? 2 : 1);
}

std::size_t Objective::part_count() const {
  std::size_t n = outputs_.size() > 1 ? outputs_.size() : 0;
  for (const auto& [m, weighted, j] : metrics_in_order()) n += m->parts();
  return n;
}

std::vector<std::string> Objective::metric_names() const {
  std::vector<std::string> names;
  const bool several = outputs_.size() > 1;
  if (several)
    for (const Output& o : outputs_) names.push_back(o.name + "_loss");
  for (const bool weighted : {false, true})
    for (const Output& o : outputs_)
      for (const Metric* m : weighted ? o.weighted_metrics : o.metrics)
        names.push_back(several ? o.name + "_" + m->name() : m->name());
  return names;
}

std::vector<double> Objective::values(const std::vector<MetricSum>& parts) const {
  if (parts.size() != part_count())
    throw std::logic_error("objective: " + std::to_string(parts.size()) + " metric parts for " +
                           std::to_string(part_count()));
  std::vector<double> out;
  std::size_t k = 0;
  if (outputs_.size() > 1)
    for (; k < outputs_.size(); ++k) out.push_back(parts[k].mean());
  for (const auto& [m, weighted, j] : metrics_in_order()) {
    out.push_back(m->value(std::span<const MetricSum>(parts).subspan(k, m->parts())));
    k += m->parts();
  }
  return out;
}

void Objective::check_targets(const Model& model, const std::vector<Shape>& targets,
                              std::int64_t weights) const {
  const std::size_t n = outputs_.size();
  if (model.output_count() != n) throw std::logic_error("an objective for another model");
  if (weights > 1) check_position_weights(model, weights);
  if (targets.size() == n) {
    for (std::size_t j = 0; j < n; ++j) try {
        outputs_[j].loss->check_shapes(model.output_shape(j), targets[j]);
      } catch (const ShapeError& e) {
        if (n == 1) throw;
        throw ShapeError("output '" + outputs_[j].name + "': " + e.what());
      }
    return;
  }
  if (targets.size() != 1)
    throw ShapeError("the data has " + std::to_string(targets.size()) +
                     " target arrays for the model's " + std::to_string(n) + " outputs (" +
                     output_list(model) + ")");
  std::int64_t total = 0;
  std::string parts;
  for (std::size_t j = 0; j < n; ++j) {
    const Shape& shape = model.output_shape(j);
    const std::int64_t w = sparse(*outputs_[j].loss) ? positions_of(shape) : shape_size(shape);
    total += w;
    parts += (j ? ", " : "") + outputs_[j].name + ": " + std::to_string(w);
  }
  if (targets[0].size() != 1 || targets[0][0] != total)
    throw ShapeError("targets of shape " + shape_to_string(targets[0], true) + " for the model's " +
                     std::to_string(n) + " outputs, which take " + std::to_string(total) +
                     " values per sample, packed (" + parts + ")");
}

void Objective::check_position_weights(const Model& model, std::int64_t weights) const {
  const std::string held =
      "the sample weights hold " + std::to_string(weights) + " values per sample";
  if (outputs_.size() > 1)
    throw ShapeError(held + ", but a model of several outputs (" + output_list(model) +
                     ") takes one weight per sample");
  const Shape& shape = model.output_shape(0);
  const std::int64_t positions = positions_of(shape);
  if (weights == positions) return;
  const std::string name =
      outputs_[0].name.empty() ? "the output" : "output '" + outputs_[0].name + "'";
  const std::string per_position =
      positions > 1 ? " or one per position, " + std::to_string(positions) + " (shape " +
                          shape_to_string(Shape(shape.begin(), shape.end() - 1), true) + ")"
                    : "";
  throw ShapeError(held + ", but " + name + " of shape " + shape_to_string(shape, true) +
                   " takes one weight per sample" + per_position);
}

void Objective::check_labels(const Tensor& y, const Model& model) const {
  check_label_columns(label_columns(model), y, {}, {});
}

std::function<void(const Tensor&, std::span<const std::int64_t>)> Objective::label_check(
    const Model& model, SamplePlace place) const {
  return [columns = label_columns(model), place = std::move(place)](
             const Tensor& y, std::span<const std::int64_t> samples) {
    check_label_columns(columns, y, samples, place);
  };
}

std::vector<LabelColumn> Objective::label_columns(const Model& model) const {
  if (model.output_count() != outputs_.size())
    throw std::logic_error("an objective for another model");
  std::vector<LabelColumn> columns;
  for (std::size_t j = 0; j < outputs_.size(); ++j) {
    const Loss& loss = *outputs_[j].loss;
    const Shape& shape = model.output_shape(j);
    const backend::LossDesc desc = loss.desc();
    columns.push_back(
        {outputs_[j].name, loss.name(), sparse(loss), shape_size(shape),
         shape.empty() ? 1 : shape.back(), positions_of(shape),
         desc.ignores_class ? std::optional<float>(desc.ignore_class) : std::nullopt});
  }
  return columns;
}

namespace {

// The kept steps of a mask (0/1 values), counted on the host: a device's mask is copied there
// (the step synchronizes, and runs without a CUDA graph).
double kept_steps(backend::Backend& ops, const Tensor& mask) {
  Tensor host = mask;
  if (!mask.on_host()) {
    host = Tensor(mask.shape());
    ops.copy(mask, host);
  }
  double kept = 0;
  for (std::int64_t i = 0; i < host.size(); ++i) kept += host[i];
  return kept;
}

}  // namespace

bool Objective::weighs_steps(std::size_t j) const {
  return outputs_[j].masked || outputs_[j].loss->desc().ignores_class;
}

std::size_t Objective::weighed_count() const {
  std::size_t n = 0;
  for (std::size_t j = 0; j < outputs_.size(); ++j) n += weighs_steps(j) ? 1 : 0;
  return n;
}

void Objective::require_whole_batches(const std::string& path) const {
  for (std::size_t j = 0; j < outputs_.size(); ++j)
    if (weighs_steps(j))
      throw ConfigError(
          path, "the loss of output '" + outputs_[j].name + "' " +
                    (outputs_[j].masked ? "weighs its steps by a Keras mask" : "ignores a class") +
                    ", so it is divided by the kept steps of the whole batch, "
                    "which a pipeline's micro-batch does not know when it computes "
                    "its gradient; train it without \"pipeline\"");
}

// Keras' apply_mask: the loss of output j weighs each step by kept · total / valid — kept the
// step's mask times whether its label is not the ignored class (Keras' ignore_class, whose
// losses carry that mask), total the batch's steps (B · steps), valid its kept ones — so that
// its mean over the B · steps values is the sum over the kept steps / valid. B and valid are the
// global batch's: the replicas sum their rows and counts first (Model::mask_count_sum). No kept
// step: weights 0, a loss of 0 (Keras' divide_no_nan).
void Objective::weigh_kept_steps(backend::Backend& ops, const Model& model,
                                 const std::vector<const Tensor*>& outputs,
                                 const std::vector<const Tensor*>& targets,
                                 ObjectiveScratch& scratch) const {
  const std::int64_t rows = outputs[0]->rank() > 0 ? outputs[0]->dim(0) : 0;
  std::vector<double> counts{static_cast<double>(rows)};
  std::vector<const Tensor*> kept(outputs_.size(), nullptr);  // each output's 0/1 kept steps
  scratch.step_weights.resize(outputs_.size());
  for (std::size_t j = 0; j < outputs_.size(); ++j) {
    if (!weighs_steps(j)) continue;
    const std::int64_t steps = positions_of_batch(*outputs[j]);
    const backend::LossDesc loss = outputs_[j].loss->desc();
    const Tensor* mask = outputs_[j].masked ? model.output_mask(j) : nullptr;
    if (outputs_[j].masked && (!mask || mask->size() != rows * steps))
      throw std::logic_error("objective: output '" + outputs_[j].name +
                             "' has no mask of its steps from the model's forward");
    kept[j] = mask;  // the mask alone, read as it is
    if (loss.ignores_class) {
      Tensor& labelled = ops.place(scratch.step_weights[j], {rows, steps});
      ops.sequence_mask(*targets[j], loss.ignore_class, 1, labelled);
      if (mask) ops.multiply(labelled, *mask, labelled);
      kept[j] = &labelled;
    }
    counts.push_back(kept_steps(ops, *kept[j]));
  }
  if (model.mask_count_sum()) model.mask_count_sum()(counts.data(), counts.size());
  for (std::size_t j = 0, c = 1; j < outputs_.size(); ++j) {
    if (!weighs_steps(j)) continue;
    const double valid = counts[c++];
    const double total = counts[0] * static_cast<double>(positions_of_batch(*outputs[j]));
    Tensor& weights = kept[j] == &scratch.step_weights[j]
                          ? scratch.step_weights[j]
                          : ops.place(scratch.step_weights[j], kept[j]->shape());
    ops.affine(*kept[j], valid > 0 ? static_cast<float>(total / valid) : 0.0f, 0.0f, weights);
  }
}

void Objective::count_without_rows(const Model& model) const {
  if (weighed_count() == 0 || !model.mask_count_sum()) return;
  std::vector<double> counts(1 + weighed_count(), 0.0);
  model.mask_count_sum()(counts.data(), counts.size());
}

void Objective::enqueue(backend::Backend& ops, const Model& model,
                        const std::vector<const Tensor*>& outputs, const Tensor& y,
                        float grad_scale, bool gradients, ObjectiveScratch& scratch,
                        backend::Sums& sums) const {
  const std::size_t n = outputs_.size();
  if (outputs.size() != n)
    throw std::logic_error("objective: " + std::to_string(outputs.size()) + " outputs for " +
                           std::to_string(n));
  for (std::size_t j = 0; j < n; ++j)
    if (outputs_[j].masked != model.output_masked(j))
      throw std::logic_error("objective: made for another model's masks");
  const std::int64_t rows = outputs[0]->rank() > 0 ? outputs[0]->dim(0) : 0;
  std::int64_t cols = 0;
  for (std::size_t j = 0; j < n; ++j) cols += target_width(*outputs_[j].loss, *outputs[j]);
  const std::int64_t per_row =
      weight_columns(y, rows, cols, n == 1 ? positions_of_batch(*outputs[0]) : 0);
  const bool by_position = per_row > 1;  // Keras' temporal weights, of the one output
  const std::int64_t y_cols = cols + per_row;
  const Tensor* weights = nullptr;
  if (per_row > 0) {
    ops.place(scratch.weights, by_position ? Shape{rows, per_row} : Shape{rows});
    ops.copy_columns(y, y_cols, cols, scratch.weights, per_row, 0, per_row);
    weights = &scratch.weights;
  }
  scratch.targets.resize(n);
  std::vector<const Tensor*> targets(n, &y);
  for (std::size_t j = 0, offset = 0; j < n; ++j) {
    const auto tw = target_width(*outputs_[j].loss, *outputs[j]);
    if (y_cols != tw) {
      ops.place(scratch.targets[j], {rows, tw});
      ops.copy_columns(y, y_cols, static_cast<std::int64_t>(offset), scratch.targets[j], tw, 0, tw);
      targets[j] = &scratch.targets[j];
    }
    offset += static_cast<std::size_t>(tw);
  }
  if (weighed_count() > 0) weigh_kept_steps(ops, model, outputs, targets, scratch);
  // Weights by position weigh each position's loss (and its kept-steps weight) instead of rows.
  if (by_position && weighs_steps(0))
    ops.multiply(scratch.step_weights[0], *weights, scratch.step_weights[0]);
  const auto loss_weights = [&](std::size_t j) {
    if (weighs_steps(j))
      return backend::WeightTensors{by_position ? nullptr : weights, &scratch.step_weights[j]};
    return by_position ? backend::WeightTensors{nullptr, weights} : backend::WeightTensors{weights};
  };
  // A masked output's metrics weigh its steps by the mask; weighted ones by the weights too
  // (by position: the mask times them).
  const Tensor* mask_0 = outputs_[0].masked ? model.output_mask(0) : nullptr;
  if (by_position && mask_0 && has_weighted_metrics())
    ops.multiply(*mask_0, *weights, ops.place(scratch.weighted_mask, mask_0->shape()));
  const auto metric_weights = [&](std::size_t j, bool weigh) {
    const Tensor* mask = outputs_[j].masked ? model.output_mask(j) : nullptr;
    if (weigh && by_position)
      return backend::WeightTensors{nullptr, mask ? &scratch.weighted_mask : weights};
    return backend::WeightTensors{weigh ? weights : nullptr, mask};
  };
  sums.reset(slot_count());
  scratch.grads.resize(n);
  scratch.grad_views.clear();
  for (std::size_t j = 0; j < n; ++j) {
    const Output& o = outputs_[j];
    const std::int64_t width = row_width(*outputs[j]);
    ops.loss_sum(at_positions(o.loss->desc(), *outputs[j]), *outputs[j], *targets[j],
                 loss_weights(j), width, grad_scale * static_cast<float>(o.weight),
                 gradients ? &scratch.grads[j] : nullptr, sums, j);
    scratch.grad_views.push_back(&scratch.grads[j]);
  }
  std::size_t slot = n;
  for (const auto& [m, weigh, j] : metrics_in_order()) {
    const std::int64_t width = row_width(*outputs[j]);
    const backend::WeightTensors w = metric_weights(j, weigh);
    const backend::MetricDesc desc = at_positions(m->desc(), *outputs[j]);
    if (m->histogram()) {
      ops.metric_histogram(desc, *outputs[j], *targets[j], w, width, sums, slot);
      slot += m->parts();
      continue;
    }
    ops.metric_sum(desc, *outputs[j], *targets[j], w, width, sums, slot++);
    if (m->ratio())
      ops.metric_sum(at_positions(m->count_desc(), *outputs[j]), *outputs[j], *targets[j], w, width,
                     sums, slot++);
  }
  backend::MetricDesc samples;
  samples.kind = backend::MetricDesc::Kind::samples;
  if (has_weighted_metrics())  // the weights' sum (by position: each row's mean weight)
    ops.metric_sum(
        by_position ? at_positions(samples, *outputs[0]) : samples, *outputs[0], *targets[0],
        by_position ? backend::WeightTensors{nullptr, weights} : backend::WeightTensors{weights},
        row_width(*outputs[0]), sums, slot++);
  // Each masked output's kept steps (each row's mean mask: metric sums are means over a row's
  // steps), plain and weighted: its metrics' counts.
  for (std::size_t j = 0; j < n; ++j) {
    if (!outputs_[j].masked) continue;
    const backend::MetricDesc kept = at_positions(samples, *outputs[j]);
    ops.metric_sum(kept, *outputs[j], *targets[j], metric_weights(j, false), row_width(*outputs[j]),
                   sums, slot++);
    if (has_weighted_metrics())
      ops.metric_sum(kept, *outputs[j], *targets[j], metric_weights(j, true),
                     row_width(*outputs[j]), sums, slot++);
  }
}

StepSums Objective::read(backend::Sums& sums, std::int64_t rows) const {
  const std::vector<double> v = sums.read();
  const auto count = static_cast<double>(rows);
  const double weight_sum = has_weighted_metrics() ? v[mask_slots() - 1] : count;
  // Each output's metrics' counts: its rows (or their weights), or a masked output's kept steps.
  std::vector<double> plain(outputs_.size(), count), weighted(outputs_.size(), weight_sum);
  for (std::size_t j = 0, k = mask_slots(); j < outputs_.size(); ++j) {
    if (!outputs_[j].masked) continue;
    plain[j] = v[k++];
    if (has_weighted_metrics()) weighted[j] = v[k++];
  }
  StepSums s;
  s.loss.count = count;
  for (std::size_t j = 0; j < outputs_.size(); ++j) {
    s.loss.sum += outputs_[j].weight * v[j];
    if (outputs_.size() > 1) s.metrics.push_back({v[j], count});
  }
  std::size_t k = outputs_.size();
  for (const auto& [m, weigh, j] : metrics_in_order()) {
    if (m->histogram()) {
      for (std::size_t b = 0; b < m->parts(); ++b) s.metrics.push_back({v[k++], 0});
      continue;
    }
    const double sum = v[k++];
    s.metrics.push_back({sum, m->ratio() ? v[k++] : weigh ? weighted[j] : plain[j]});
  }
  return s;
}

StepSums Objective::zero() const {
  StepSums s;
  s.metrics.resize(part_count());
  return s;
}

Objective make_objective(const json& loss, const json& loss_weights, const json& metrics,
                         const Model& model, const json& weighted_metrics) {
  const std::size_t n = model.output_count();
  const KerasDefinitions definitions =
      model.keras2() ? KerasDefinitions::keras2 : KerasDefinitions::keras3;
  std::vector<Objective::Output> outputs(n);
  std::vector<std::unique_ptr<Loss>> losses;
  std::vector<std::unique_ptr<Metric>> owned;
  const bool loss_per_output =
      loss.is_array() || (loss.is_object() && !loss.contains("class_name"));
  const auto loss_entries = per_output_entries(loss, loss_per_output, "loss", model);
  for (std::size_t j = 0; j < n; ++j) {
    outputs[j].name = model.output_name(j);
    outputs[j].masked = model.output_masked(j);
    if (!loss_entries[j].first)
      throw ConfigError("loss",
                        "gives no loss for output '" + outputs[j].name +
                            "' (every output needs one; its outputs: " + output_list(model) + ")");
    losses.push_back(make_loss(*loss_entries[j].first, loss_entries[j].second, definitions));
    outputs[j].loss = losses.back().get();
  }
  if (loss_weights.is_number() && n == 1) {  // Keras 3 takes one number for a single output
    outputs[0].weight = read_weight(loss_weights, "loss_weights");
  } else if (!loss_weights.is_null()) {
    if (!loss_weights.is_array() && !loss_weights.is_object())
      throw ConfigError("loss_weights",
                        "expected a list of weights in output order, or an "
                        "object of weights by output name, got " +
                            loss_weights.dump());
    const auto weights = per_output_entries(loss_weights, true, "loss_weights", model);
    for (std::size_t j = 0; j < n; ++j)
      if (weights[j].first) outputs[j].weight = read_weight(*weights[j].first, weights[j].second);
  }
  const auto plain = metric_lists(metrics, "metrics", model);
  const auto weighted = metric_lists(weighted_metrics, "weighted_metrics", model);
  for (std::size_t j = 0; j < n; ++j) {
    std::vector<std::unique_ptr<Metric>> made, made_weighted;
    if (plain[j].first)
      made = make_metrics(*plain[j].first, plain[j].second, *outputs[j].loss, model.output_shape(j),
                          nullptr, definitions);
    if (weighted[j].first)
      made_weighted = make_metrics(*weighted[j].first, weighted[j].second, *outputs[j].loss,
                                   model.output_shape(j), &made, definitions);
    for (auto& m : made) outputs[j].metrics.push_back(m.get());
    for (auto& m : made_weighted) outputs[j].weighted_metrics.push_back(m.get());
    for (auto* list : {&made, &made_weighted})
      for (auto& m : *list) owned.push_back(std::move(m));
  }
  return Objective(std::move(outputs), std::move(losses), std::move(owned));
}

}  // namespace tandem
