// Conv2D: y = activation(conv(x, kernel) + bias), Keras semantics, channels_last:
// (batch, rows, cols, in) -> (batch, out_rows, out_cols, filters), kernel (kh, kw, in, filters),
// bias (filters,). padding "valid" or "same" (TensorFlow's SAME), strides, dilation_rate.
//
// Runs on oneDNN convolution primitives (forward, backward-data, backward-weights with bias).
// Activations stay NHWC, the Keras layout, with no reorder; the kernel is handed to oneDNN in the
// layout it prefers (format_tag::any), reordered from/to Keras' HWIO once per step. Measured on the
// fashion-cnn shapes (batch 128, two AVX-512 cores): NHWC + HWIO runs im2col+GEMM (conv2 3x3
// 32->64 on 13x13: forward 3.3-5.7 ms, backward 5.3 ms); everything `any` runs blocked nChw16c
// kernels behind activation reorders (1.7 + 2.9 ms); NHWC activations with `any` weights run
// brgconv forward (1.2 + 2.9 ms), the fastest overall. (convolution_auto picks Winograd for some
// shapes: faster on conv2's forward, 7x slower on conv1's, and less exact: not used.)
//
// Primitives are created per (batch size, thread count) on first use and cached; the scratchpad
// and reordered weights are owned by the layer, so a steady-state step allocates nothing.
#pragma once

#include <map>
#include <memory>
#include <utility>

#include "nn/activation_fn.hpp"
#include "nn/initializer.hpp"
#include "nn/spatial.hpp"
#include "tandem/layer.hpp"

namespace tandem::nn {

struct Conv2DOptions {
  std::int64_t filters = 0;
  Pair kernel_size{1, 1};
  Pair strides{1, 1};
  Padding padding = Padding::valid;
  Pair dilation_rate{1, 1};
  ActivationKind activation = ActivationKind::linear;
  bool use_bias = true;
  Initializer kernel_initializer{"glorot_uniform", std::nullopt, 0};
  Initializer bias_initializer{"zeros", std::nullopt, 0};
};

class Conv2D : public Layer {
 public:
  Conv2D(std::string name, Conv2DOptions options);
  ~Conv2D() override;
  std::string class_name() const override { return "Conv2D"; }
  /// input_shape is (rows, cols, channels). Throws ShapeError naming the layer for another rank,
  /// or a kernel larger than the (unpadded) input with "valid" padding.
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;
  /// A relu Conv2D lets the next layer apply its relu (see Layer).
  bool has_output_relu() const override { return options_.activation == ActivationKind::relu; }
  void set_output_relu_external(bool external) override { relu_external_ = external; }

 private:
  struct Primitives;  // oneDNN primitives and memories for one batch size
  Primitives& primitives(std::int64_t batch);
  void prepare_backward(Primitives& p, bool need_data);
  [[noreturn]] void fail(const char* what, const std::exception& e) const;

  Conv2DOptions options_;
  Shape input_shape_;   // (rows, cols, in)
  Shape output_shape_;  // (out_rows, out_cols, filters)
  Window rows_, cols_;
  Parameter kernel_, bias_;
  Tensor input_;                // the last forward's input (shared storage, not a copy)
  Tensor pre_;                  // conv + bias, kept only for activations other than linear and relu
  bool relu_external_ = false;  // outputs z; backward() receives dL/dz (the next layer's job)
  Tensor output_;               // activation(pre_)
  Tensor grad_pre_, grad_input_;
  Tensor scratch_;  // oneDNN scratchpad, shared by all primitives of this layer
  std::map<std::pair<std::int64_t, int>, std::unique_ptr<Primitives>> cache_;
};

}  // namespace tandem::nn
