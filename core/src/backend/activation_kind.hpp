// The element-wise (and row-wise softmax) activation functions every backend implements, by
// their Keras meaning, and the parameters of Keras' ReLU-family layers. Parsing Keras names is nn's (nn/activation_fn.hpp); the arithmetic is
// backend/kernel_math.hpp's, written once for the host and the device.
//
// Header rules: no includes beyond the standard library's; compiles with nvcc -std=c++17.
#pragma once

#include <cstdint>

namespace tandem::backend {

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
  exponential,
  leaky_relu,           // Keras 3's activations.leaky_relu: negative_slope 0.2
  hard_sigmoid,         // Keras 3's: relu6(x + 3) / 6
  hard_sigmoid_keras2,  // Keras 2's hard_sigmoid: clip(0.2 x + 0.5, 0, 1) (nn/keras_generation.hpp)
  hard_swish,           // x * hard_sigmoid(x)
  mish,                 // x * tanh(softplus(x))
  log_softmax           // per row, like softmax
};

/// Whether f'(x) is a function of y = f(x) alone: kernel_math's activation_derivative reads no x
/// for tanh, sigmoid and exponential, and relu's x > 0 is y > 0. A layer may then apply the
/// activation in place and keep no pre-activation values (activation_backward given the output
/// for both).
constexpr bool derivative_from_output(ActivationKind kind) {
  return kind == ActivationKind::relu || kind == ActivationKind::tanh ||
         kind == ActivationKind::sigmoid || kind == ActivationKind::exponential;
}

/// Keras' ReLU layer with its parameters (LeakyReLU is a ReLU with a negative slope), or its ELU
/// layer with an alpha: kernel_math's shaped_activation_value says what each computes.
struct ShapedActivation {
  bool elu = false;
  float negative_slope = 0, threshold = 0;  // ReLU, LeakyReLU
  bool capped = false;                      // ReLU: max_value given
  float max_value = 0;
  float alpha = 1;  // ELU
};

}  // namespace tandem::backend
