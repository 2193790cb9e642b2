#include "cuda/replica/device_parameters.hpp"

#include <algorithm>

#include "cuda/replica/host_copies.hpp"

namespace tandem::cuda {

namespace {

constexpr std::int64_t kAlign = 64;  // floats: 256 bytes

std::int64_t aligned(std::int64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// A zeroed flat tensor of at least one element (a model may have nothing trainable).
Tensor flat(backend::Backend& backend, std::int64_t floats) {
  Tensor t = backend.tensor({std::max<std::int64_t>(floats, 1)});
  backend.fill(t, 0.0f);
  return t;
}

}  // namespace

ParameterLayout plan_layout(Model& model) {
  ParameterLayout layout;
  const auto all = model.parameters();
  const auto trainable = model.trainable_parameters();
  layout.offsets.assign(all.size(), -1);
  layout.trainable.assign(all.size(), false);
  std::int64_t offset = 0;
  for (Parameter* p : trainable) {
    const auto i = static_cast<std::size_t>(std::find(all.begin(), all.end(), p) - all.begin());
    layout.offsets[i] = offset;
    layout.trainable[i] = true;
    layout.segments.push_back(offset);
    offset += aligned(p->value.size());
  }
  layout.trainable_floats = offset;
  layout.segments.push_back(offset);
  for (std::size_t i = 0; i < all.size(); ++i)
    if (layout.offsets[i] < 0) {
      layout.offsets[i] = offset;
      offset += aligned(all[i]->value.size());
    }
  layout.total_floats = offset;
  return layout;
}

DeviceParameters::DeviceParameters(Model& device_model, std::size_t slot_count,
                                   backend::Backend& backend)
    : backend_(backend), layout_(plan_layout(device_model)) {
  values_ = flat(backend_, layout_.total_floats);
  grads_ = flat(backend_, layout_.trainable_floats);
  gradients_ = Tensor::view(grads_, 0, {layout_.trainable_floats});
  const auto params = device_model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    Parameter& p = *params[i];
    const Shape shape = p.value.shape();
    p.value = Tensor::view(values_, layout_.offsets[i], shape);
    p.grad = layout_.trainable[i] ? Tensor::view(grads_, layout_.offsets[i], shape) : Tensor();
  }
  for (std::size_t s = 0; s < slot_count; ++s) slots_.push_back(flat(backend_, layout_.trainable_floats));
  const auto trainable = device_model.trainable_parameters();
  slot_views_.resize(trainable.size());
  for (std::size_t i = 0; i < trainable.size(); ++i) {
    for (Tensor& s : slots_)
      slot_views_[i].push_back(Tensor::view(s, layout_.segments[i], trainable[i]->value.shape()));
    update_tensors_.push_back({&trainable[i]->value, &trainable[i]->grad, &slot_views_[i]});
  }
}

void DeviceParameters::push(Model& host, Optimizer& optimizer, cudaStream_t stream) {
  const auto params = host.parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    copy_to_device(values_.data() + layout_.offsets[i], params[i]->value.data(),
                   params[i]->value.size(), stream);
  const auto trainable = host.trainable_parameters();
  for (std::size_t s = 0; s < slots_.size(); ++s)
    backend_.fill(slots_[s], optimizer.slot_initial_value(s));
  if (optimizer.slotted_params() != trainable.size() || trainable.empty()) return;
  for (std::size_t i = 0; i < trainable.size(); ++i)
    for (std::size_t s = 0; s < slots_.size(); ++s)
      copy_to_device(slots_[s].data() + layout_.segments[i], optimizer.slots(i)[s].data(),
                     trainable[i]->value.size(), stream);
}

void DeviceParameters::pull(Model& host, Optimizer& optimizer, cudaStream_t stream) const {
  const auto params = host.parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    copy_to_host(params[i]->value.data(), values_.data() + layout_.offsets[i],
                 params[i]->value.size(), stream);
  if (slots_.empty()) return;
  const auto trainable = host.trainable_parameters();
  if (optimizer.slotted_params() != trainable.size()) optimizer.create_slots(trainable);
  for (std::size_t i = 0; i < trainable.size(); ++i)
    for (std::size_t s = 0; s < slots_.size(); ++s)
      copy_to_host(optimizer.slots(i)[s].data(), slots_[s].data() + layout_.segments[i],
                   trainable[i]->value.size(), stream);
}

}  // namespace tandem::cuda
