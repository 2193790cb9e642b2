#include "nn/axis_permutation.hpp"

#include <utility>

namespace tandem::nn {

// Axis by axis from the first, the axis that belongs there is carried in from its place by
// swaps with its left neighbour, each a swap_middle_axes of (the axes before, the two, the axes
// after).
void permute_axes(backend::Backend& ops, const Tensor& from, const Shape& dims,
                  const std::vector<int>& order, Tensor& to, Tensor& scratch) {
  std::vector<int> current(order.size());
  for (std::size_t i = 0; i < current.size(); ++i) current[i] = static_cast<int>(i);
  Shape now = dims;
  const Tensor* source = &from;  // the first swap reads the input itself
  for (std::size_t target = 0; target < order.size(); ++target) {
    std::size_t at = target;
    while (current[at] != order[target]) ++at;
    for (; at > target; --at) {
      std::int64_t outer = 1, inner = 1;
      for (std::size_t k = 0; k + 1 < at; ++k) outer *= now[k];
      for (std::size_t k = at + 1; k < now.size(); ++k) inner *= now[k];
      Tensor& into = source == &to ? scratch : to;
      ops.swap_middle_axes(*source, {outer, now[at - 1], now[at], inner},
                           ops.place(into, from.shape()));
      if (&into == &scratch) std::swap(to, scratch);
      source = &to;
      std::swap(now[at - 1], now[at]);
      std::swap(current[at - 1], current[at]);
    }
  }
  if (source == &from) ops.copy(from, ops.place(to, from.shape()));  // the identity order
  to = to.reshaped(now);
}

std::vector<int> inverse_order(const std::vector<int>& order) {
  std::vector<int> inverse(order.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    inverse[static_cast<std::size_t>(order[i])] = static_cast<int>(i);
  return inverse;
}

bool identity_order(const std::vector<int>& order) {
  for (std::size_t i = 0; i < order.size(); ++i)
    if (order[i] != static_cast<int>(i)) return false;
  return true;
}

}  // namespace tandem::nn
