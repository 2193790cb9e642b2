// Private (nn): Keras' inputs of any length. A Keras config may leave dimensions of an input's
// shape null besides the batch axis — `Input(shape=(None,))` for token sequences, (None, None,
// 3) for a fully convolutional network — and Keras then takes each batch at its own length.
// Tandem builds a model for fixed shapes (its buffers, its ONNX graph, its replicas' splits), so
// such a dimension (kAnyLength here) takes the length of the data the model is built for: the
// training data's when it trains, the data it predicts or evaluates. The config keeps its nulls
// (what Keras reads back is what the user wrote). Plain functions.
#pragma once

#include <string>

#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// "(None, None, 3)": a declared shape as Keras prints it, None for a kAnyLength dimension and,
/// with `batch_dim`, the batch axis.
std::string declared_shape_text(const Shape& declared, bool batch_dim);

/// Whether `declared` leaves any dimension to the data.
bool has_any_length(const Shape& declared);

/// `declared` with each kAnyLength dimension taken from `data` (a sample's shape in the data).
/// Throws ShapeError when the ranks differ or a dimension the config fixes is not the data's,
/// naming `who` ("input 'tokens'") and `path` (where the config declares the shape).
Shape with_data_lengths(const Shape& declared, const Shape& data, const std::string& who,
                        const std::string& path);

/// Whether `given`, a built model's tensor, fits `declared` (a nested model's InputLayer):
/// the same rank and the same dimensions where `declared` fixes them.
bool fits_declared(const Shape& given, const Shape& declared);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
