// The CPU backend's losses, metrics and step sums: kernel_math.hpp's per-row functions, rows in
// parallel into per-row doubles that are then added in row order (deterministic).
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/parallel.hpp"
#include "tandem/error.hpp"

namespace tandem::backend {

namespace {

class HostSums final : public Sums {
 public:
  void reset(std::size_t count) override { values_.assign(count, 0.0); }
  std::vector<double> read() override { return values_; }
  double& at(std::size_t slot) {
    if (slot >= values_.size())
      throw std::logic_error("step sums: slot " + std::to_string(slot) + " of " +
                             std::to_string(values_.size()));
    return values_[slot];
  }

 private:
  std::vector<double> values_;
};

// The sum over rows of f(row), rows computed in parallel, added in row order.
template <class F>
double sum_rows(std::int64_t rows, std::int64_t work_per_row, F f) {
  std::vector<double> per_row(static_cast<std::size_t>(rows));
  cpu::parallel_for(rows, std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(work_per_row, 1)),
                    [&](std::int64_t b, std::int64_t e) {
                      for (std::int64_t r = b; r < e; ++r)
                        per_row[static_cast<std::size_t>(r)] = f(r);
                    });
  double total = 0;
  for (double v : per_row) total += v;
  return total;
}

}  // namespace

// What the device reports as a NaN row, the CPU names: the first label that is no class index.
void check_sparse_labels(const Tensor& target, std::int64_t classes, const LossDesc& loss) {
  if (!target.on_host()) throw std::logic_error("check_sparse_labels: a device tensor");
  for (std::int64_t r = 0; r < target.size(); ++r)
    if (math::sparse_label(target[r], classes) < 0 && !math::ignored_label(loss, target[r]))
      throw DataError("sparse_categorical_crossentropy: label " + std::to_string(target[r]) +
                      " is not a class index in [0, " + std::to_string(classes) + ")");
}

std::unique_ptr<Sums> CpuBackend::sums() {
  return std::make_unique<HostSums>();
}

void CpuBackend::loss_sum(const LossDesc& desc, const Tensor& pred, const Tensor& target,
                          const WeightTensors& weights, std::int64_t cols, float grad_scale,
                          Tensor* grad, Sums& sums, std::size_t slot) {
  require_device(*this, pred, "loss_sum");
  require_device(*this, target, "loss_sum");
  const std::int64_t rows = cols > 0 ? pred.size() / cols : 0;
  const math::RowWeights w = row_weights(*this, weights, rows, desc.positions, "loss_sum");
  if (desc.kind == LossDesc::Kind::scce)
    check_sparse_labels(target, desc.positions > 1 ? cols / desc.positions : cols, desc);
  if (grad) place(*grad, pred.shape());
  const float* p = pred.data();
  const float* t = target.data();
  float* g = grad ? grad->data() : nullptr;
  static_cast<HostSums&>(sums).at(slot) = sum_rows(rows, cols, [&](std::int64_t r) {
    return math::weighted_loss_row(desc, p, t, w, g, r, cols, grad_scale);
  });
}

void CpuBackend::penalty_sum(const Tensor& w, float l1, float l2, Sums& sums, std::size_t slot) {
  require_device(*this, w, "penalty_sum");
  const float* p = w.data();
  double total = 0;
  for (std::int64_t i = 0; i < w.size(); ++i) total += math::f2d(math::penalty_value(p[i], l1, l2));
  static_cast<HostSums&>(sums).at(slot) = total;
}

void CpuBackend::metric_sum(const MetricDesc& desc, const Tensor& pred, const Tensor& target,
                            const WeightTensors& weights, std::int64_t cols, Sums& sums,
                            std::size_t slot) {
  require_device(*this, pred, "metric_sum");
  require_device(*this, target, "metric_sum");
  const std::int64_t rows = cols > 0 ? pred.size() / cols : 0;
  const math::RowWeights w = row_weights(*this, weights, rows, desc.positions, "metric_sum");
  const float* p = pred.data();
  const float* t = target.data();
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    total += math::weighted_metric_row(desc, p, t, w, r, cols);
  static_cast<HostSums&>(sums).at(slot) = total;
}

void CpuBackend::metric_histogram(const MetricDesc& desc, const Tensor& pred, const Tensor& target,
                                  const WeightTensors& weights, std::int64_t cols, Sums& sums,
                                  std::size_t first_slot) {
  require_device(*this, pred, "metric_histogram");
  require_device(*this, target, "metric_histogram");
  const std::int64_t rows = cols > 0 ? pred.size() / cols : 0;
  const math::RowWeights w = row_weights(*this, weights, rows, desc.positions, "metric_histogram");
  auto& host = static_cast<HostSums&>(sums);
  const auto bins = static_cast<std::size_t>(math::histogram_bins(desc));
  if (bins == 0) return;
  host.at(first_slot + bins - 1);  // the range is there
  double* out = &host.at(first_slot);
  std::fill(out, out + bins, 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    math::histogram_row(desc, pred.data(), target.data(), w, r, cols,
                        [&](std::int64_t bin, double v) { out[bin] += v; });
}

}  // namespace tandem::backend
