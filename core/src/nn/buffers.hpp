// Private: a layer's working tensors (outputs, gradients, kept products) live on its backend's
// device. sized() resizes one there, moving it first when the layer changed backends.
#pragma once

#include "backend/ops.hpp"
#include "tandem/tensor.hpp"

namespace tandem::nn {

inline Tensor& sized(backend::Backend& ops, Tensor& t, const Shape& shape) {
  if (t.memory() != ops.memory()) t = ops.tensor();
  t.resize(shape);
  return t;
}

}  // namespace tandem::nn
