// Element-wise (and row-wise softmax) activation functions with their derivatives, shared by
// the Activation layer and Dense's `activation` argument. Names follow Keras.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::nn {

enum class ActivationKind {
  linear,
  relu,
  tanh,
  sigmoid,
  softmax,
  gelu,
  elu,
  selu,
  softplus,
  softsign,
  swish,
  exponential
};

/// Parses a Keras activation name ("relu", "silu" = "swish", null/"linear"); throws ConfigError
/// naming `path` and listing the known names.
ActivationKind parse_activation(const std::string& name, const std::string& path);
std::string activation_name(ActivationKind kind);
std::vector<std::string> activation_names();

/// out = f(in) over `rows` rows of `cols` values (softmax is per row). in == out is allowed.
void activation_forward(ActivationKind kind, const float* in, float* out, std::int64_t rows,
                        std::int64_t cols);
/// grad_in = grad_out * f'(in), given in (pre-activation) and out (activation). grad_in may alias
/// grad_out.
void activation_backward(ActivationKind kind, const float* in, const float* out,
                         const float* grad_out, float* grad_in, std::int64_t rows,
                         std::int64_t cols);

}  // namespace tandem::nn
