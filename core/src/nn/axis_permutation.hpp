// Private (nn): a tensor's axes put in another order on a backend, as a chain of swaps of two
// adjacent axes (backend swap_middle_axes), the fewest that sort the axes: Keras' Permute and
// EinsumDense's arrangement of its operands for its products. Plain functions.
#pragma once

#include <vector>

#include "backend/ops.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// `from`, whose dimensions are `dims` (every axis, the batch's too), with its axes put in
/// `order` (order[i]: the axis of `from` that becomes axis i) into `to`, shaped so; `scratch`
/// holds the intermediate swaps. `to` and `scratch` are the caller's buffers, placed on `ops`'s
/// device; `from` is left as it is. The identity order copies.
void permute_axes(backend::Backend& ops, const Tensor& from, const Shape& dims,
                  const std::vector<int>& order, Tensor& to, Tensor& scratch);

/// The order that undoes `order`.
std::vector<int> inverse_order(const std::vector<int>& order);

/// Whether `order` leaves every axis where it is.
bool identity_order(const std::vector<int>& order);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
