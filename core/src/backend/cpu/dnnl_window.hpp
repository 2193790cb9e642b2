// oneDNN's dims of a sliding-window geometry (backend/window_math.hpp), for the CPU backend's
// convolution and pooling primitives: oneDNN lists the spatial axes after the batch and the
// channels, ([depth,] rows, cols). Include only from .cpp files: it brings in <dnnl.hpp>.
// Ownership: none (values). Thread-safety: pure, any thread.
#pragma once

#include <dnnl.hpp>

#include <cstdint>

#include "backend/window_math.hpp"

namespace tandem::cpu {

/// One value per spatial axis of `g` (depth only for a volume), `of(axis)` each.
template <class F>
dnnl::memory::dims dnnl_spatial(const backend::window::Geometry& g, F&& of) {
  if (g.volume) return {of(g.depth), of(g.rows), of(g.cols)};
  return {of(g.rows), of(g.cols)};
}

/// `lead` (the batch and the channels) followed by the input's spatial sizes, or the output's.
inline dnnl::memory::dims dnnl_cells(dnnl::memory::dims lead, const backend::window::Geometry& g,
                                     bool input) {
  for (std::int64_t n :
       dnnl_spatial(g, [input](const backend::window::Axis& a) { return input ? a.in : a.out; }))
    lead.push_back(n);
  return lead;
}

/// `lead` (a kernel's filter and channel dims) followed by its taps along each spatial axis.
inline dnnl::memory::dims dnnl_taps(dnnl::memory::dims lead, const backend::window::Geometry& g) {
  for (std::int64_t n : dnnl_spatial(g, [](const backend::window::Axis& a) { return a.kernel; }))
    lead.push_back(n);
  return lead;
}

/// The window's strides, dilations (oneDNN counts 0 for none), and paddings before and after.
struct DnnlWindow {
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
};

inline DnnlWindow dnnl_window(const backend::window::Geometry& g) {
  using backend::window::Axis;
  return {dnnl_spatial(g, [](const Axis& a) { return a.stride; }),
          dnnl_spatial(g, [](const Axis& a) { return a.dilation - 1; }),
          dnnl_spatial(g, [](const Axis& a) { return a.pad_before; }),
          dnnl_spatial(g, [](const Axis& a) { return backend::window::pad_after(a); })};
}

}  // namespace tandem::cpu
