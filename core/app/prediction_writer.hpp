// Writing predictions: CSV (one row per sample) or NumPy .npy (float32, the tensor's shape).
#pragma once

#include <string>

#include "tandem/tensor.hpp"

namespace tandem::app {

/// Throws ConfigError for an unsupported extension (before any work is done).
void check_prediction_output(const std::string& path);
/// "-" writes CSV to stdout. Files are replaced atomically (tandem/atomic_file.hpp): a failure
/// leaves the previous file, if any, whole. Throws RunError naming the path.
void write_predictions(const Tensor& predictions, const std::string& path);

}  // namespace tandem::app
