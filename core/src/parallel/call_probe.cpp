#include "parallel/call_probe.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>

#include "tensor/host_tensor_bytes.hpp"

namespace tandem {

namespace {

// Wraps the running of one call's forward or backward: around(k, run) must call run() once.
using AroundCall = std::function<void(std::size_t call, const std::function<void()>& run)>;

// A copy of `model` whose layers compute on the same backends as the model's.
std::unique_ptr<Model> probe_copy(const Model& model) {
  std::unique_ptr<Model> copy = model.clone();
  for (std::size_t l = 0; l < model.layer_count(); ++l)
    copy->layer(l).set_backend(model.layer(l).ops());
  return copy;
}

// One training forward and backward of `copy` on `rows` rows of zeros (the outputs' gradients
// zeros too), call by call, each call's forward and each call's backward inside `around`.
void run_call_by_call(Model& copy, std::int64_t rows, const AroundCall& around) {
  Shape shape{std::max<std::int64_t>(rows, 1)};
  for (auto d : copy.input_shape()) shape.push_back(d);
  Tensor x(shape);
  const std::size_t n = copy.call_count();
  copy.start_forward(x);
  for (std::size_t k = 0; k < n; ++k) around(k, [&] { copy.forward_calls({k}, true, 0); });
  const auto& outputs = copy.forward_results();
  std::vector<Tensor> grads;
  std::vector<const Tensor*> views;
  grads.reserve(outputs.size());
  for (const Tensor* output : outputs) grads.emplace_back(output->shape());
  for (const Tensor& g : grads) views.push_back(&g);
  copy.start_backward(views);
  for (std::size_t k = n; k-- > 0;)
    around(k, [&] { copy.backward_calls({k}, [](std::size_t) {}); });
}

// Per call, the host tensor bytes its forward and backward leave allocated on `rows` rows, on a
// fresh copy of `model` (so that each buffer is allocated once, at that size).
std::vector<std::int64_t> call_bytes_held(const Model& model, std::int64_t rows) {
  std::unique_ptr<Model> copy = probe_copy(model);
  std::vector<std::int64_t> held(copy->call_count(), 0);
  run_call_by_call(*copy, rows, [&](std::size_t k, const std::function<void()>& run) {
    const std::int64_t before = host_tensor_bytes_on_this_thread();
    run();
    held[k] += host_tensor_bytes_on_this_thread() - before;
  });
  return held;
}

}  // namespace

std::vector<double> measure_call_seconds(const Model& model, std::int64_t rows, int repeats) {
  std::unique_ptr<Model> copy = probe_copy(model);
  std::vector<double> best(copy->call_count(), std::numeric_limits<double>::infinity());
  using Clock = std::chrono::steady_clock;
  for (int r = 0; r < repeats; ++r) {
    std::vector<double> seconds(best.size(), 0.0);
    run_call_by_call(*copy, rows, [&](std::size_t k, const std::function<void()>& run) {
      const auto t0 = Clock::now();
      run();
      seconds[k] += std::chrono::duration<double>(Clock::now() - t0).count();
    });
    for (std::size_t k = 0; k < best.size(); ++k) best[k] = std::min(best[k], seconds[k]);
  }
  return best;
}

std::vector<std::int64_t> measure_call_bytes_per_row(const Model& model) {
  const std::vector<std::int64_t> small = call_bytes_held(model, kProbeRows);
  std::vector<std::int64_t> per_row = call_bytes_held(model, 2 * kProbeRows);
  for (std::size_t k = 0; k < per_row.size(); ++k)
    per_row[k] = std::max<std::int64_t>(0, (per_row[k] - small[k]) / kProbeRows);
  return per_row;
}

}  // namespace tandem
