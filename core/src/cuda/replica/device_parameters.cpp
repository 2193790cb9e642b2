#include "cuda/replica/device_parameters.hpp"

#include <algorithm>

#include "cuda/replica/host_copies.hpp"
#include "nn/layer_indices.hpp"

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

ParameterLayout plan_layout(Model& model, const std::vector<std::size_t>& layers) {
  ParameterLayout layout;
  const auto all = model.parameters();
  const auto trainable = model.trainable_parameters();
  std::vector<bool> here(all.size(), false);
  for (std::size_t l : layers)
    for (Parameter* p : model.layer(l).parameters())
      here[static_cast<std::size_t>(std::find(all.begin(), all.end(), p) - all.begin())] = true;
  layout.offsets.assign(all.size(), -1);
  layout.trainable.assign(all.size(), false);
  std::int64_t offset = 0;
  for (std::size_t t = 0; t < trainable.size(); ++t) {
    const auto i =
        static_cast<std::size_t>(std::find(all.begin(), all.end(), trainable[t]) - all.begin());
    if (!here[i]) continue;
    layout.offsets[i] = offset;
    layout.trainable[i] = true;
    layout.trainable_index.push_back(t);
    layout.segments.push_back(offset);
    offset += aligned(trainable[t]->value.size());
  }
  layout.trainable_floats = offset;
  layout.segments.push_back(offset);
  for (std::size_t i = 0; i < all.size(); ++i)
    if (here[i] && layout.offsets[i] < 0) {
      layout.offsets[i] = offset;
      offset += aligned(all[i]->value.size());
    }
  layout.total_floats = offset;
  return layout;
}

ParameterLayout plan_layout(Model& model) {
  return plan_layout(model, nn::every_layer(model));
}

DeviceParameters::DeviceParameters(Model& device_model, std::size_t slot_count,
                                   backend::Backend& backend)
    : DeviceParameters(device_model, nn::every_layer(device_model), slot_count, backend) {}

DeviceParameters::DeviceParameters(Model& device_model, const std::vector<std::size_t>& layers,
                                   std::size_t slot_count, backend::Backend& backend)
    : backend_(backend), layout_(plan_layout(device_model, layers)) {
  values_ = flat(backend_, layout_.total_floats);
  grads_ = flat(backend_, layout_.trainable_floats);
  gradients_ = Tensor::view(grads_, 0, {layout_.trainable_floats});
  const auto params = device_model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (layout_.offsets[i] < 0) continue;  // another stage's
    Parameter& p = *params[i];
    const Shape shape = p.value.shape();
    p.value = Tensor::view(values_, layout_.offsets[i], shape);
    p.grad = layout_.trainable[i] ? Tensor::view(grads_, layout_.offsets[i], shape) : Tensor();
  }
  for (std::size_t s = 0; s < slot_count; ++s)
    slots_.push_back(flat(backend_, layout_.trainable_floats));
  const auto trainable = device_model.trainable_parameters();
  slot_views_.resize(layout_.trainable_index.size());
  for (std::size_t j = 0; j < layout_.trainable_index.size(); ++j) {
    Parameter* p = trainable[layout_.trainable_index[j]];
    for (Tensor& s : slots_)
      slot_views_[j].push_back(Tensor::view(s, layout_.segments[j], p->value.shape()));
    update_tensors_.push_back({&p->value, &p->grad, &slot_views_[j]});
  }
}

void DeviceParameters::push(Model& host, Optimizer& optimizer, cudaStream_t stream) {
  const auto params = host.parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    if (layout_.offsets[i] >= 0)
      copy_to_device(values_.data() + layout_.offsets[i], params[i]->value.data(),
                     params[i]->value.size(), stream);
  const auto trainable = host.trainable_parameters();
  for (std::size_t s = 0; s < slots_.size(); ++s)
    backend_.fill(slots_[s], optimizer.slot_initial_value(s));
  if (optimizer.slotted_params() != trainable.size() || trainable.empty()) return;
  for (std::size_t j = 0; j < layout_.trainable_index.size(); ++j) {
    const std::size_t t = layout_.trainable_index[j];
    for (std::size_t s = 0; s < slots_.size(); ++s)
      copy_to_device(slots_[s].data() + layout_.segments[j], optimizer.slots(t)[s].data(),
                     trainable[t]->value.size(), stream);
  }
}

void DeviceParameters::pull(Model& host, Optimizer& optimizer, cudaStream_t stream) const {
  const auto params = host.parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    if (layout_.offsets[i] >= 0)
      copy_to_host(params[i]->value.data(), values_.data() + layout_.offsets[i],
                   params[i]->value.size(), stream);
  if (slots_.empty()) return;
  const auto trainable = host.trainable_parameters();
  if (optimizer.slotted_params() != trainable.size()) optimizer.create_slots(trainable);
  for (std::size_t j = 0; j < layout_.trainable_index.size(); ++j) {
    const std::size_t t = layout_.trainable_index[j];
    for (std::size_t s = 0; s < slots_.size(); ++s)
      copy_to_host(optimizer.slots(t)[s].data(), slots_[s].data() + layout_.segments[j],
                   trainable[t]->value.size(), stream);
  }
}

}  // namespace tandem::cuda
