#include "onnx/conv_nodes.hpp"

#include <algorithm>
#include <utility>

namespace tandem::onnx_export {

Sizes sizes_of(const nlohmann::json& config, const char* key, std::int64_t fallback,
               std::size_t axes) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return Sizes(axes, fallback);
  if (it->is_number_integer()) return Sizes(axes, it->get<std::int64_t>());
  if (it->size() == 1 && axes == 2) return {1, (*it)[0].get<std::int64_t>()};
  return it->get<Sizes>();
}

Window window_over(const Sizes& grid, Sizes kernel, Sizes strides, Sizes dilation,
                   nn::Padding padding) {
  Window w{std::move(kernel), std::move(strides), std::move(dilation),
           Sizes(2 * grid.size(), 0)};
  for (std::size_t a = 0; a < grid.size(); ++a) {
    const nn::Window along =
        nn::window_along(grid[a], w.kernel[a], w.strides[a], w.dilation[a], padding);
    w.pads[a] = along.pad_before;
    w.pads[a + grid.size()] = along.pad_after;
  }
  return w;
}

std::vector<float> onnx_kernel(const Tensor& kernel) {
  const std::int64_t a_size = kernel.dim(kernel.rank() - 2), b_size = kernel.dim(kernel.rank() - 1);
  const std::int64_t taps = kernel.size() / std::max<std::int64_t>(a_size * b_size, 1);
  std::vector<float> w(static_cast<std::size_t>(kernel.size()));
  for (std::int64_t t = 0; t < taps; ++t)
    for (std::int64_t a = 0; a < a_size; ++a)
      for (std::int64_t b = 0; b < b_size; ++b)
        w[(b * a_size + a) * taps + t] = kernel[(t * a_size + a) * b_size + b];
  return w;
}

Sizes weight_dims(std::int64_t b, std::int64_t a, const Sizes& taps) {
  Sizes dims{b, a};
  dims.insert(dims.end(), taps.begin(), taps.end());
  return dims;
}

std::string conv_node(OnnxGraph& graph, const std::string& x,
                      const std::vector<std::string>& weights, const Window& w,
                      std::int64_t groups, const std::string& prefix) {
  std::vector<std::string> inputs{x};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  return graph.node("Conv", inputs, prefix)
      .attr("kernel_shape", w.kernel)
      .attr("strides", w.strides)
      .attr("dilations", w.dilation)
      .attr("pads", w.pads)
      .attr("group", groups)
      .output();
}

}  // namespace tandem::onnx_export
