// Private (CUDA module): the Keras metrics of nn/metrics.cpp on the device, one row per thread
// with device_math.hpp's arithmetic. Launchers queue work on `stream` and return at once;
// pointers are device memory of the current device.
//
// The backend::MetricDesc of a host Metric: Metric::desc().
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/kernel_math.hpp"

namespace tandem::cuda {

/// row_sum[r] = row r's contribution to the metric's sum, weighted by `weights` (per row and per
/// position, each may be null): kernel_math's weighted_metric_row, computed in double as the CPU
/// does, rounded to float here (exact for the accuracies of one-column or categorical outputs); add
/// them with kernels.hpp's sum(). pred is rows x cols; target rows x cols, or rows class indices
/// for the sparse metrics.
void metric_rows(const backend::MetricDesc& metric, const float* pred, const float* target,
                 backend::math::RowWeights weights, std::int64_t rows, std::int64_t cols,
                 float* row_sum, cudaStream_t stream);

/// out[b] for every bin b < histogram_bins(metric) = the sum of the rows' contributions to bin b
/// (kernel_math's histogram_row), added in the CPU's order: the CPU's values bit for bit. out is
/// device memory of that many doubles; weights as metric_rows'.
void metric_histogram(const backend::MetricDesc& metric, const float* pred, const float* target,
                      backend::math::RowWeights weights, std::int64_t rows, std::int64_t cols,
                      double* out, cudaStream_t stream);

}  // namespace tandem::cuda
