#include "parallel/pipeline_moving_state.hpp"

#include <algorithm>

#include "nn/layer_extensions.hpp"

namespace tandem::detail {

namespace {

// `values` as host floats: itself on the host, else a host copy through `ops` (which waits for
// the copy).
Tensor on_host(const Tensor& values, backend::Backend& ops) {
  if (values.on_host()) return values;
  Tensor host(values.shape());
  ops.copy(values, host);
  return host;
}

}  // namespace

PipelineMovingState::PipelineMovingState(std::size_t layer, int stage,
                                         std::vector<Parameter*> owner)
    : layer_(layer), stage_(stage), owner_(std::move(owner)) {
  for (const Parameter* p : owner_) sums_.emplace_back(static_cast<std::size_t>(p->value.size()));
}

std::vector<PipelineMovingState> PipelineMovingState::of(Model& owner,
                                                         const PipelineLayout& layout) {
  std::vector<PipelineMovingState> states;
  for (int s = 0; s < layout.stage_count(); ++s)
    for (std::size_t l : layout.layers[static_cast<std::size_t>(s)])
      if (auto* stats = nn::cross_replica_statistics_of(owner.layer(l)))
        states.push_back(PipelineMovingState(l, s, stats->moving_state()));
  return states;
}

bool PipelineMovingState::holds(const Parameter* p) const {
  return std::find(owner_.begin(), owner_.end(), p) != owner_.end();
}

void PipelineMovingState::start() {
  for (auto& s : sums_) std::fill(s.begin(), s.end(), 0.0);
  rows_ = 0;
}

void PipelineMovingState::reset(Model& slot) const {
  const auto values = state_of(slot);
  backend::Backend& ops = slot.layer(layer_).ops();
  for (std::size_t j = 0; j < owner_.size(); ++j) ops.copy(owner_[j]->value, values[j]->value);
}

void PipelineMovingState::add(Model& slot, std::int64_t rows) {
  const auto values = state_of(slot);
  backend::Backend& ops = slot.layer(layer_).ops();
  const auto weight = static_cast<double>(rows);
  for (std::size_t j = 0; j < owner_.size(); ++j) {
    const Tensor host = on_host(values[j]->value, ops);
    for (std::int64_t k = 0; k < host.size(); ++k)
      sums_[j][static_cast<std::size_t>(k)] += weight * host[k];
  }
  rows_ += weight;
}

void PipelineMovingState::finish(Model& slot, std::int64_t replica_rows) {
  const auto values = state_of(slot);
  backend::Backend& ops = slot.layer(layer_).ops();
  for (std::size_t j = 0; j < owner_.size(); ++j) {
    Tensor& v = values[j]->value;
    if (rows_ == 0) {
      ops.copy(owner_[j]->value, v);
      continue;
    }
    Tensor average(v.shape());
    for (std::int64_t k = 0; k < average.size(); ++k)
      average[k] = static_cast<float>(sums_[j][static_cast<std::size_t>(k)] / rows_);
    ops.copy(average, v);
  }
  nn::cross_replica_statistics_of(slot.layer(layer_))->average_moving_state(replica_rows);
  for (std::size_t j = 0; j < owner_.size(); ++j) ops.copy(values[j]->value, owner_[j]->value);
}

std::vector<Parameter*> PipelineMovingState::state_of(Model& model) const {
  return nn::cross_replica_statistics_of(model.layer(layer_))->moving_state();
}

bool is_moving_state(const std::vector<PipelineMovingState>& states, const Parameter* p) {
  return std::any_of(states.begin(), states.end(),
                     [p](const PipelineMovingState& s) { return s.holds(p); });
}

}  // namespace tandem::detail
