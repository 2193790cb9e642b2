// Writing predictions: CSV (one row per sample), NumPy .npy (float32, the tensor's shape) or
// JSON Lines (one JSON array of a sample's values per line). Samples read from files of their
// own (image folders) carry their file: CSV rows start with it, JSON Lines are objects
// {"path": file, "outputs": [values]}; .npy holds the values alone.
#pragma once

#include <string>
#include <vector>

#include "tandem/tensor.hpp"

namespace tandem::app {

enum class PredictionFormat { csv, npy, jsonl };

/// The format `format` names ("csv", "npy", "jsonl"), or when it is empty the one of `path`'s
/// extension (.csv, .npy, .jsonl; "-", stdout, is CSV). Throws ConfigError naming --format or
/// --output (before any work is done).
PredictionFormat prediction_format(const std::string& format, const std::string& path);
/// "-" writes to stdout. `files`: each row's file, or empty. Files are replaced atomically
/// (tandem/atomic_file.hpp): a failure leaves the previous file, if any, whole. Throws RunError
/// naming the path.
void write_predictions(const Tensor& predictions, const std::vector<std::string>& files,
                       const std::string& path, PredictionFormat format);

}  // namespace tandem::app
