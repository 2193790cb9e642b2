// Private (CUDA module): Tandem's own CUDA kernels, for what cuBLAS and cuDNN do not do: bias and
// activation, their gradients, losses, metrics and the fused optimizer updates. Every launcher
// queues work on `stream` and returns at once; pointers are device memory of the current device.
//
// Determinism: every sum adds its terms in an order fixed by the shapes alone (no atomics), so
// the same inputs give the same bits run to run. The optimizer updates round each operation
// separately (no fused multiply-add), so they equal the CPU backend's float arithmetic bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::cuda {

enum class Activation { linear, relu, tanh, sigmoid };

/// y = act(y + bias[c]) in place, y a rows x cols row-major matrix; bias may be null.
void bias_activation(float* y, const float* bias, std::int64_t rows, std::int64_t cols,
                     Activation act, cudaStream_t stream);

/// dz = dy * act'(z) written through the activation's output y (relu: y > 0; tanh: 1 - y^2;
/// sigmoid: y (1 - y)); dz may be dy.
void activation_backward(const float* y, const float* dy, float* dz, std::int64_t n, Activation act,
                         cudaStream_t stream);

/// out[c] = sum over r of x[r, c] (x rows x cols, row-major): the bias gradient of a Dense layer.
/// `scratch` holds at least column_sums_scratch(rows, cols) floats.
void column_sums(const float* x, float* out, std::int64_t rows, std::int64_t cols, float* scratch,
                 cudaStream_t stream);
std::int64_t column_sums_scratch(std::int64_t rows, std::int64_t cols);

/// Binary cross-entropy of predictions (probabilities, or logits when from_logits) against
/// targets, Keras' formula with label smoothing: row_loss[r] = mean over the row's columns;
/// grad (may be null) = dLoss/dpred * grad_scale, for the sum of row losses.
void binary_crossentropy(const float* pred, const float* target, std::int64_t rows,
                         std::int64_t cols, bool from_logits, float label_smoothing,
                         float grad_scale, float* row_loss, float* grad, cudaStream_t stream);

/// Sparse categorical cross-entropy: labels hold class indices as floats; pred holds
/// probabilities, or logits when from_logits (softmax inside). row_loss and grad as above.
/// A label outside [0, classes) makes its row's loss NaN.
void sparse_categorical_crossentropy(const float* pred, const float* labels, std::int64_t rows,
                                     std::int64_t classes, bool from_logits, float grad_scale,
                                     float* row_loss, float* grad, cudaStream_t stream);

/// Per-row metric values (0 or 1): binary accuracy (pred > threshold equals target > 0.5,
/// averaged over the row's columns) and sparse categorical accuracy (argmax equals label).
void binary_accuracy(const float* pred, const float* target, std::int64_t rows, std::int64_t cols,
                     float threshold, float* row_value, cudaStream_t stream);
void sparse_categorical_accuracy(const float* pred, const float* labels, std::int64_t rows,
                                 std::int64_t classes, float* row_value, cudaStream_t stream);

/// *out = the sum of x[0..n) in double, in a fixed order (one block).
void sum(const float* x, std::int64_t n, double* out, cudaStream_t stream);

/// Keras Adam over one flat array of every parameter: m += (g - m)(1 - b1);
/// v += (g^2 - v)(1 - b2); w -= m alpha / (sqrt(v) + eps), alpha the bias-corrected rate.
void adam_update(float* w, const float* g, float* m, float* v, std::int64_t n, float alpha,
                 float beta_1, float beta_2, float epsilon, cudaStream_t stream);
/// SGD: w -= lr g; with momentum mu: m = mu m - lr g; w += m (nesterov: w += mu m - lr g).
void sgd_update(float* w, const float* g, float* m, std::int64_t n, float lr, float momentum,
                bool nesterov, cudaStream_t stream);

/// x *= factor.
void scale(float* x, std::int64_t n, float factor, cudaStream_t stream);
/// x[i] = value: the value is a kernel argument, so a captured graph replays it as it was.
void fill(float* x, std::int64_t n, float value, cudaStream_t stream);

}  // namespace tandem::cuda
