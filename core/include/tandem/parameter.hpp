// Parameter: one named weight of a layer and its gradient.
//
// Names follow Keras ("kernel", "bias", "gamma", "moving_mean", ...). Non-trainable parameters
// (BatchNorm's moving statistics) have no gradient and are skipped by optimizers.
// Owned by its layer; pointers to it stay valid for the layer's lifetime.
// Thread-safety: as its layer's (one thread at a time).
#pragma once

#include <string>

#include "tandem/export.hpp"
#include "tandem/tensor.hpp"

namespace tandem {

struct TANDEM_EXPORT Parameter {
  std::string name;  // "kernel"
  Tensor value;
  Tensor grad;  // same shape as value; empty when not trainable
  bool trainable = true;
};

}  // namespace tandem
