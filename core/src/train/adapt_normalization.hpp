// Keras' adapt() for a fresh run: a Normalization layer that keeps its statistics as weights
// (Keras' config of an adapted layer, mean and variance null) and is called on one of the model's
// inputs gets the mean and variance of the training data, feature by feature of the last axis,
// over every sample and every position of the other axes, as Keras' adapt(x_train) computes
// them. Only for a run that loads no weights (a checkpoint or --weights brings its own).
// Threads: the driving thread, before training; reads the dataset once.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "tandem/model.hpp"

namespace tandem {

/// What became of one layer: adapted, or left as the identity (mean 0, variance 1) because it is
/// called on another layer's output, whose values are not data, or called more than once.
struct AdaptNote {
  bool adapted = false;
  std::string text;  // one line for the log
};

/// Adapts every such layer of `model` (built, its weights on the host) to `train`, reading it
/// once; one note per layer that keeps its statistics as weights. Throws DataError when the data
/// cannot be read.
std::vector<AdaptNote> adapt_normalizations(Model& model, const Dataset& train);

}  // namespace tandem
