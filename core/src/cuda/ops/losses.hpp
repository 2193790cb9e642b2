// Private (CUDA module): the Keras losses of nn/losses.cpp on the device, one row per thread with
// device_math.hpp's arithmetic (the CPU's, operation for operation). Launchers queue work on
// `stream` and return at once; pointers are device memory of the current device.
//
// The backend::LossDesc of a host Loss: Loss::desc().
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/kernel_math.hpp"

namespace tandem::cuda {

/// row_loss[r] = the loss of row r, the value the CPU's Loss::compute adds up (in double, in row
/// order) for its return value, rounded to float here; add them with kernels.hpp's sum(). grad
/// (may be null) = what Loss::compute writes into its grad for this `scale`: scale times the
/// derivative of the sum of row losses. pred is rows x cols; target is rows x cols, or rows
/// class indices for scce. `weights` (per row and per position, each may be null) weigh them as
/// kernel_math's weighted_loss_row does. An scce label that is not a class index gives its row a
/// NaN loss and NaN gradients (the CPU throws: check the labels on the host with
/// check_sparse_labels()).
void loss_rows(const backend::LossDesc& loss, const float* pred, const float* target,
               backend::math::RowWeights weights, std::int64_t rows, std::int64_t cols, float scale,
               float* row_loss, float* grad, cudaStream_t stream);

}  // namespace tandem::cuda
