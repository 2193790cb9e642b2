// Exporters of the sliding-window and image-geometry layers: convolutions (Conv1D, Conv2D with
// groups, Conv3D, DepthwiseConv1D/2D, SeparableConv1D/2D, Conv2DTranspose), pooling (1-D, 2-D,
// 3-D, global, adaptive) and ZeroPadding2D, Cropping2D, UpSampling2D. ONNX computes them channels
// first; paddings are explicit, computed by the layers' own geometry (nn/spatial.hpp), so Keras'
// "same" (one extra row or column after, when odd) is what ONNX does. A 1-D layer is its 2-D form
// on a (1, steps, channels) view, as Tandem computes it (nn/reshaped_2d.hpp).
#include <algorithm>
#include <array>
#include <vector>

#include "backend/adaptive_pool_math.hpp"
#include "nn/reshaped_2d.hpp"
#include "nn/resizing.hpp"
#include "nn/spatial.hpp"
#include "nn/volume_cells.hpp"
#include "onnx/conv_nodes.hpp"
#include "onnx/layer_export.hpp"

namespace tandem::onnx_export {

namespace {

std::string padding_of(const LayerCall& call) {
  const auto it = call.config.find("padding");
  return it != call.config.end() && it->is_string() ? it->get<std::string>() : "valid";
}

// The window of a convolution or pooling layer on the channels-last image (or volume) `image`.
Window window_of(const LayerCall& call, const Shape& image, const char* size_key, bool pooling) {
  const std::size_t axes = image.size() - 1;
  Sizes kernel = sizes_of(call.config, size_key, 1, axes);
  Sizes strides = sizes_of(call.config, "strides", 1, axes);
  if (pooling && call.config.contains("strides") && call.config["strides"].is_null())
    strides = kernel;
  Sizes dilation = sizes_of(call.config, "dilation_rate", 1, axes);
  const std::string padding = padding_of(call);
  if (padding == "causal") {  // Conv1D: (k - 1) * dilation zeros before the steps
    Window w{kernel, strides, dilation, Sizes(2 * axes, 0)};
    w.pads[1] = (w.kernel[1] - 1) * w.dilation[1];
    return w;
  }
  return window_over(Sizes(image.begin(), image.end() - 1), std::move(kernel),
                     std::move(strides), std::move(dilation),
                     padding == "same" ? nn::Padding::same : nn::Padding::valid);
}

// A 1-D layer's input (steps, channels) seen as the image (1, steps, channels), and its output
// seen back as Keras' shape; a 2-D layer's input and output as they are.
bool one_dimensional(const LayerCall& call) { return call.inputs[0].shape.size() == 2; }

OnnxValue image_view(LayerCall& call) {
  const OnnxValue& x = call.inputs[0];
  if (!one_dimensional(call)) return call.graph.in_layout(x, true);
  const OnnxValue view = reshape_to(call.graph, x, {1, x.shape[0], x.shape[1]}, call.prefix);
  return call.graph.in_layout(view, true);
}

OnnxValue from_image(LayerCall& call, const OnnxValue& image) {
  if (!one_dimensional(call)) return image;
  return reshape_to(call.graph, image, call.output_shape, call.prefix);
}

// A Conv node on the channels-first image `x` with ONNX weights `oihw` of (out, in/g, kh, kw).
OnnxValue conv(LayerCall& call, const OnnxValue& x, const std::string& tag,
               const std::vector<float>& oihw, std::int64_t out, std::int64_t in_per_group,
               const Window& w, std::int64_t groups, const char* bias, const Shape& out_shape) {
  std::vector<std::string> weights{call.constant(tag, weight_dims(out, in_per_group, w.kernel), oihw)};
  if (bias && call.has_weight(bias))
    weights.push_back(call.constant("bias", {out}, values_of(call.weight(bias))));
  return {conv_node(call.graph, x.name, weights, w, groups, call.prefix), out_shape, true};
}

// The image shape (rows, cols, channels) of a 1-D layer's output view.
Shape image_output(const LayerCall& call) {
  const Shape& s = call.output_shape;
  return one_dimensional(call) ? Shape{1, s[0], s[1]} : s;
}

OnnxValue activated(LayerCall& call, const OnnxValue& y) {
  const auto it = call.config.find("activation");
  if (it == call.config.end() || !it->is_string()) return y;
  return apply_activation(call.graph, y, call.activation(it->get<std::string>()), call.prefix);
}

OnnxValue export_conv(LayerCall& call) {  // Conv1D, Conv2D and Conv3D
  const OnnxValue x = image_view(call);
  const Tensor& kernel = call.weight("kernel");
  const Window w = window_of(call, x.shape, "kernel_size", false);
  const std::int64_t in_per_group = kernel.dim(kernel.rank() - 2);
  const std::int64_t out = kernel.dim(kernel.rank() - 1);
  const OnnxValue y = conv(call, x, "kernel", onnx_kernel(kernel), out, in_per_group, w,
                           x.shape.back() / in_per_group, "bias", image_output(call));
  return activated(call, from_image(call, y));
}

// DepthwiseConv2D: kernel (kh, kw, in, multiplier) (DepthwiseConv1D's (k, in, multiplier));
// output channel c * multiplier + m.
OnnxValue depthwise(LayerCall& call, const OnnxValue& x, const Window& w, const char* bias,
                    const Shape& out_shape) {
  const Tensor& kernel = call.weight("depthwise_kernel");
  const std::int64_t in = kernel.dim(kernel.rank() - 2), multiplier = kernel.dim(kernel.rank() - 1);
  // (kh, kw, in, mult) read as (kh, kw, 1, in * mult) is exactly ONNX's grouped layout.
  return conv(call, x, "depthwise_kernel",
              onnx_kernel(kernel.reshaped({w.kernel[0], w.kernel[1], 1, in * multiplier})),
              in * multiplier, 1, w, in, bias, out_shape);
}

OnnxValue export_depthwise_conv(LayerCall& call) {  // DepthwiseConv1D and DepthwiseConv2D
  const OnnxValue x = image_view(call);
  const Window w = window_of(call, x.shape, "kernel_size", false);
  return activated(call, from_image(call, depthwise(call, x, w, "bias", image_output(call))));
}

// SeparableConv1D and SeparableConv2D: the depthwise part, then a 1x1 convolution with the bias
// (pointwise kernel (1, 1, mid, out); SeparableConv1D's (1, mid, out)).
OnnxValue export_separable_conv(LayerCall& call) {
  const OnnxValue x = image_view(call);
  const Window w = window_of(call, x.shape, "kernel_size", false);
  const Tensor& pointwise = call.weight("pointwise_kernel");
  const std::int64_t mid = pointwise.dim(pointwise.rank() - 2);
  const std::int64_t out = pointwise.dim(pointwise.rank() - 1);
  Shape mid_shape = image_output(call);
  mid_shape.back() = mid;
  const OnnxValue d = depthwise(call, x, w, nullptr, mid_shape);
  const Window one_by_one{{1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}};
  const OnnxValue y = conv(call, d, "pointwise_kernel", onnx_kernel(pointwise), out, mid,
                           one_by_one, 1, "bias", image_output(call));
  return activated(call, from_image(call, y));
}

// Conv2DTranspose: ONNX's ConvTranspose with weights (in, out, kh, kw) from Keras' (kh, kw,
// out, in). The layer is the gradient of a convolution from its output to its input: its full
// result s(in - 1) + span (plus output_padding rows where Keras' output is longer) is cropped
// by that convolution's paddings, here a Slice after an unpadded ConvTranspose (runtimes such
// as OpenCV refuse the asymmetric paddings "same" needs).
OnnxValue export_conv_transpose(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], true);
  const Tensor& kernel = call.weight("kernel");
  // Conv1DTranspose's kernel (k, filters, in), exported on its view of one row: (1, k, ...).
  // Conv3DTranspose's (kd, kh, kw, filters, in) has three spatial axes.
  const bool one_row = kernel.rank() == 3;
  Sizes k = one_row ? Sizes{1, kernel.dim(0)} : Sizes{kernel.dim(0), kernel.dim(1)};
  if (kernel.rank() == 5) k = {kernel.dim(0), kernel.dim(1), kernel.dim(2)};
  const std::size_t axes = k.size();
  const std::int64_t out = kernel.dim(kernel.rank() - 2), in = kernel.dim(kernel.rank() - 1);
  const Window w = window_of(call, call.output_shape, "kernel_size", false);
  std::vector<std::int64_t> output_padding(axes, 0), starts(axes, 0), ends(axes, 0), sliced;
  bool crop = false;
  for (std::size_t a = 0; a < axes; ++a) {
    sliced.push_back(static_cast<std::int64_t>(a) + 2);
    const std::int64_t span = (k[a] - 1) * w.dilation[a] + 1;
    const std::int64_t full = w.strides[a] * (x.shape[a] - 1) + span;
    starts[a] = w.pads[a];
    ends[a] = w.pads[a] + call.output_shape[a];
    output_padding[a] = std::max<std::int64_t>(ends[a] - full, 0);
    crop = crop || starts[a] > 0 || ends[a] < full + output_padding[a];
  }
  std::vector<std::string> inputs{
      x.name, call.constant("kernel", weight_dims(in, out, k), onnx_kernel(kernel))};
  if (call.has_weight("bias"))
    inputs.push_back(call.constant("bias", {out}, values_of(call.weight("bias"))));
  std::string y = g.node("ConvTranspose", inputs, call.prefix)
                      .attr("kernel_shape", w.kernel)
                      .attr("strides", w.strides)
                      .attr("dilations", w.dilation)
                      .attr("output_padding", output_padding)
                      .output();
  if (crop)
    y = g.node("Slice",
               {y, g.int64s(call.prefix + "/starts", starts), g.int64s(call.prefix + "/ends", ends),
                g.int64s(call.prefix + "/axes", sliced)},
               call.prefix)
            .output();
  return activated(call, {y, call.output_shape, true});
}

OnnxValue export_pooling(LayerCall& call, const char* op) {
  const OnnxValue x = image_view(call);
  const Window w = window_of(call, x.shape, "pool_size", true);
  auto node = call.graph.node(op, {x.name}, call.prefix);
  node.attr("kernel_shape", w.kernel).attr("strides", w.strides).attr("pads", w.pads);
  if (std::string(op) == "AveragePool") node.attr("count_include_pad", std::int64_t{0});
  return from_image(call, {node.output(), image_output(call), true});
}

// Global pooling: ONNX's over the channels-first image (or volume), then Keras' shape
// ((channels), or keepdims' (1, channels), (1, 1, channels) or (1, 1, 1, channels)).
OnnxValue export_global_pooling(LayerCall& call, const char* op) {
  OnnxGraph& g = call.graph;
  const OnnxValue x = image_view(call);
  const std::string pooled = g.node(op, {x.name}, call.prefix).output();
  const std::int64_t channels = x.shape.back();
  const OnnxValue flat{g.node("Flatten", {pooled}, call.prefix).attr("axis", std::int64_t{1}).output(),
                       {channels}, false};
  if (call.output_shape.size() == 1) return flat;
  return reshape_to(g, flat, call.output_shape, call.prefix);
}

// The adaptive poolings, one spatial axis at a time (a window is a box, so its mean is the mean
// of its rows' means and its maximum the maximum of theirs): per output cell of the axis a
// Slice of its window, ReduceMean or ReduceMax over the axis, then a Concat of the cells; on the
// channels-last value.
OnnxValue export_adaptive_pooling(LayerCall& call, const char* reduce) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  OnnxValue y = g.in_layout(call.inputs[0], false);
  const std::size_t axes = y.shape.size() - 1;
  for (std::size_t a = 0; a < axes; ++a) {
    const std::int64_t in = y.shape[a], out = call.output_shape[a];
    const auto axis = static_cast<std::int64_t>(a + 1);
    const std::string axis_name = g.int64s(p + "/axis", {axis});
    std::vector<std::string> cells;
    for (std::int64_t i = 0; i < out; ++i) {
      const std::string window =
          g.node("Slice",
                 {y.name, g.int64s(p + "/start", {backend::math::adaptive_start(i, in, out)}),
                  g.int64s(p + "/end", {backend::math::adaptive_end(i, in, out)}), axis_name},
                 p)
              .output();
      cells.push_back(g.node(reduce, {window}, p)
                          .attr("axes", std::vector<std::int64_t>{axis})
                          .attr("keepdims", std::int64_t{1})
                          .output());
    }
    y.name = g.node("Concat", cells, p).attr("axis", axis).output();
    y.shape[a] = out;
  }
  return y;
}

// ZeroPadding2D and Cropping2D: ((top, bottom), (left, right)) on the rows and cols, in the
// input's own layout.
std::array<std::int64_t, 4> borders_of(const LayerCall& call, const char* key) {
  const nlohmann::json& b = call.config.at(key);
  return {b[0][0].get<std::int64_t>(), b[0][1].get<std::int64_t>(), b[1][0].get<std::int64_t>(),
          b[1][1].get<std::int64_t>()};
}

OnnxValue export_zero_padding(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const OnnxValue& x = call.inputs[0];
  const auto [top, bottom, left, right] = borders_of(call, "padding");
  std::vector<std::int64_t> pads(8, 0);
  pads[x.stored_axis(0)] = top;
  pads[x.stored_axis(1)] = left;
  pads[4 + x.stored_axis(0)] = bottom;
  pads[4 + x.stored_axis(1)] = right;
  return {g.node("Pad", {x.name, g.int64s(call.prefix + "/pads", pads)}, call.prefix).output(),
          call.output_shape, x.channels_first};
}

OnnxValue export_cropping(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const OnnxValue& x = call.inputs[0];
  const auto [top, bottom, left, right] = borders_of(call, "cropping");
  const std::string& p = call.prefix;
  const std::string sliced =
      g.node("Slice",
             {x.name, g.int64s(p + "/starts", {top, left}),
              g.int64s(p + "/ends", {x.shape[0] - bottom, x.shape[1] - right}),
              g.int64s(p + "/axes", {x.stored_axis(0), x.stored_axis(1)})},
             p)
          .output();
  return {sliced, call.output_shape, x.channels_first};
}

// UpSampling2D (nearest): each cell repeated size[0] x size[1] times.
OnnxValue export_upsampling(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], true);
  const Sizes size = sizes_of(call.config, "size", 2, 2);
  const std::string scales = call.constant("scales", {4},
      {1.0f, 1.0f, static_cast<float>(size[0]), static_cast<float>(size[1])});
  return {g.node("Resize", {x.name, "", scales}, call.prefix)
              .attr("mode", std::string("nearest"))
              .attr("coordinate_transformation_mode", std::string("asymmetric"))
              .attr("nearest_mode", std::string("floor"))
              .output(),
          call.output_shape, true};
}

// A 1-D layer computed by a 2-D one on a view (nn/reshaped_2d.hpp: Conv1DTranspose,
// ZeroPadding1D, Cropping1D, UpSampling1D, RepeatVector; CenterCrop on the same axes): the view,
// the inner layer's own nodes, the output's shape.
OnnxValue export_reshaped_2d(LayerCall& call) {
  auto& layer = static_cast<nn::Reshaped2D&>(call.layer);
  return export_on_view(call, layer.inner(), layer.inner_input_shape(), layer.inner_output_shape(),
                        layer.inner().class_name());
}

// A volume layer computed as two 2-D passes on views (nn/volume_cells.hpp: ZeroPadding3D,
// Cropping3D, UpSampling3D): each pass' own nodes on its view, as Tandem computes them.
OnnxValue export_two_pass_volume(LayerCall& call) {
  auto& layer = static_cast<nn::TwoPassVolume&>(call.layer);
  LayerCall rows = call;
  rows.output_shape = layer.first_output();
  const OnnxValue after_rows =
      export_on_view(rows, layer.first(), layer.first_input(), layer.first_output(), "rows");
  LayerCall cols = call;
  cols.inputs = {after_rows};
  return export_on_view(cols, layer.second(), layer.second_input(), layer.second_output(), "cols");
}

// A resize to the config's height and width as tf.image.resize computes it (half-pixel centres;
// bilinear, or nearest: floor((i + 0.5) · scale), ONNX's round_prefer_ceil of the half-pixel
// source point), of the window nn::resize_warp reads: the whole image, a centred window `Slice`d
// out of it (smart_resize), or the image `Pad`ded with the fill value to the target's aspect
// ratio; the identity when that window already has the target's size. The output size is given
// whole (the batch from the input's shape), so no float scale can round it.
OnnxValue export_resize(LayerCall& call, nn::ResizeWindow window_kind, bool nearest,
                        float fill_value) {
  OnnxGraph& g = call.graph;
  const OnnxValue& in = call.inputs[0];
  const std::int64_t rows = in.shape[0], cols = in.shape[1];
  const std::int64_t height = call.config.at("height").get<std::int64_t>();
  const std::int64_t width = call.config.at("width").get<std::int64_t>();
  const backend::WarpDesc d =
      nn::resize_warp(1, in.shape, height, width, window_kind, backend::WarpDesc::bilinear);
  const std::int64_t top = d.src_row, left = d.src_col;
  const std::int64_t bottom = d.src_row + d.src_rows, right = d.src_col + d.src_cols;
  const bool whole = top == 0 && left == 0 && bottom == rows && right == cols;
  if (whole && rows == height && cols == width) return in;
  const OnnxValue x = g.in_layout(in, true);
  const std::string& p = call.prefix;
  std::string window = x.name;
  if (!whole && top >= 0) {
    window = g.node("Slice",
                    {x.name, g.int64s(p + "/starts", {top, left}),
                     g.int64s(p + "/ends", {bottom, right}), g.int64s(p + "/axes", {2, 3})},
                    p)
                 .output();
  } else if (!whole) {  // (N, C, H, W): rows and columns before, then after
    window = g.node("Pad",
                    {x.name,
                     g.int64s(p + "/pads", {0, 0, -top, -left, 0, 0, bottom - rows, right - cols}),
                     g.scalar(p + "/fill", fill_value)},
                    p)
                 .attr("mode", std::string("constant"))
                 .output();
  }
  const std::string shape = g.node("Shape", {x.name}, p).output();
  const std::string batch_channels =
      g.node("Slice", {shape, g.int64s(p + "/nc_starts", {0}), g.int64s(p + "/nc_ends", {2})}, p)
          .output();
  const std::string sizes =
      g.node("Concat", {batch_channels, g.int64s(p + "/size", {height, width})}, p)
          .attr("axis", std::int64_t{0})
          .output();
  NodeBuilder resize = g.node("Resize", {window, "", "", sizes}, p);
  resize.attr("mode", std::string(nearest ? "nearest" : "linear"))
      .attr("coordinate_transformation_mode", std::string("half_pixel"));
  if (nearest) resize.attr("nearest_mode", std::string("round_prefer_ceil"));
  return {resize.output(), call.output_shape, true};
}

// RandomCrop at inference: Keras' smart_resize, bilinear.
OnnxValue export_random_crop(LayerCall& call) {
  return export_resize(call, nn::ResizeWindow::crop_to_aspect_ratio, false, 0);
}

OnnxValue export_resizing(LayerCall& call) {
  const nn::ResizeWindow window =
      call.config.value("crop_to_aspect_ratio", false)  ? nn::ResizeWindow::crop_to_aspect_ratio
      : call.config.value("pad_to_aspect_ratio", false) ? nn::ResizeWindow::pad_to_aspect_ratio
                                                        : nn::ResizeWindow::whole;
  return export_resize(call, window, call.config.value("interpolation", "bilinear") == "nearest",
                       call.config.value("fill_value", 0.0f));
}

}  // namespace

void add_spatial_exporters(ExporterTable& table) {
  table["Conv1D"] = export_conv;
  table["Conv2D"] = export_conv;
  table["Conv3D"] = export_conv;
  table["DepthwiseConv1D"] = export_depthwise_conv;
  table["DepthwiseConv2D"] = export_depthwise_conv;
  table["SeparableConv1D"] = export_separable_conv;
  table["SeparableConv2D"] = export_separable_conv;
  table["Conv2DTranspose"] = export_conv_transpose;
  table["Conv3DTranspose"] = export_conv_transpose;
  table["Conv1DTranspose"] = export_reshaped_2d;
  for (const char* cls : {"ZeroPadding3D", "Cropping3D", "UpSampling3D"})
    table[cls] = export_two_pass_volume;
  for (const char* cls : {"MaxPooling1D", "MaxPooling2D", "MaxPooling3D"})
    table[cls] = [](LayerCall& call) { return export_pooling(call, "MaxPool"); };
  for (const char* cls : {"AveragePooling1D", "AveragePooling2D", "AveragePooling3D"})
    table[cls] = [](LayerCall& call) { return export_pooling(call, "AveragePool"); };
  for (const char* cls :
       {"GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D"})
    table[cls] = [](LayerCall& call) { return export_global_pooling(call, "GlobalAveragePool"); };
  for (const char* cls : {"GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D"})
    table[cls] = [](LayerCall& call) { return export_global_pooling(call, "GlobalMaxPool"); };
  for (const char* cls :
       {"AdaptiveAveragePooling1D", "AdaptiveAveragePooling2D", "AdaptiveAveragePooling3D"})
    table[cls] = [](LayerCall& call) { return export_adaptive_pooling(call, "ReduceMean"); };
  for (const char* cls : {"AdaptiveMaxPooling1D", "AdaptiveMaxPooling2D", "AdaptiveMaxPooling3D"})
    table[cls] = [](LayerCall& call) { return export_adaptive_pooling(call, "ReduceMax"); };
  table["ZeroPadding2D"] = export_zero_padding;
  table["Cropping2D"] = export_cropping;
  table["UpSampling2D"] = export_upsampling;
  for (const char* cls : {"ZeroPadding1D", "Cropping1D", "UpSampling1D", "RepeatVector"})
    table[cls] = export_reshaped_2d;
  table["RandomCrop"] = export_random_crop;
  table["Resizing"] = export_resizing;
  table["CenterCrop"] = export_reshaped_2d;  // its Cropping2D or Resizing
}

}  // namespace tandem::onnx_export
