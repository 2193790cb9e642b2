// Private (nn): a batch's shapes from a per-sample shape — the batch axis in front, and the check
// that a tensor is a batch of a given per-sample shape. Plain functions.
#pragma once

#include <string>

#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// (batch, sample...).
Shape with_batch(std::int64_t batch, const Shape& sample);

/// Throws ShapeError "<who> expects inputs (None, sample...), got (...)" unless x has shape
/// (batch, sample...) for some batch. `who`: "layer 'dense' (Dense)", "model 'm'".
void require_batch_of(const Tensor& x, const Shape& sample, const std::string& who);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
