// Private (ONNX export): what the exporters of convolutions share — the convolution layers'
// (export_spatial_layers.cpp) and the convolutional LSTMs' (export_conv_lstm.cpp): a sliding
// window with ONNX's explicit pads, Keras' kernels in ONNX's weight layout, and the Conv node.
// Ownership: values, or nodes added to the borrowed graph. One thread (the graph's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/spatial.hpp"
#include "onnx/onnx_graph.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::onnx_export {

using Sizes = std::vector<std::int64_t>;

/// A sliding window along a channels-first tensor's spatial axes, with ONNX's explicit pads:
/// every axis' before, then every axis' after.
struct Window {
  Sizes kernel, strides, dilation, pads;
};

/// Keras' size list `key` of `config` for `axes` spatial axes: one integer for all of them, or
/// one per axis (a 1-D layer's 1-element list goes along the cols of its (1, steps) view);
/// absent or null, `fallback` for each.
Sizes sizes_of(const nlohmann::json& config, const char* key, std::int64_t fallback,
               std::size_t axes);

/// The window of `kernel`, `strides` and `dilation` over the spatial sizes `grid` with Keras'
/// `padding` (TensorFlow's SAME: the extra cell after).
Window window_over(const Sizes& grid, Sizes kernel, Sizes strides, Sizes dilation,
                   nn::Padding padding);

/// Keras' kernel (taps..., a, b) as ONNX's (b, a, taps...): a convolution's (kh, kw, in/groups,
/// out) as Conv's (out, in/groups, kh, kw) (a volume's kd first), a transposed one's (kh, kw,
/// out, in) as ConvTranspose's (in, out, kh, kw).
std::vector<float> onnx_kernel(const Tensor& kernel);

/// (b, a, taps...): the ONNX weight dims of onnx_kernel's values.
Sizes weight_dims(std::int64_t b, std::int64_t a, const Sizes& taps);

/// A Conv node of channels-first `x` with `weights` (the weight initializer, then the bias' if
/// any) over window `w` in `groups` groups; its output's name.
std::string conv_node(OnnxGraph& graph, const std::string& x,
                      const std::vector<std::string>& weights, const Window& w,
                      std::int64_t groups, const std::string& prefix);

}  // namespace tandem::onnx_export

TANDEM_INTERNAL_API_END
