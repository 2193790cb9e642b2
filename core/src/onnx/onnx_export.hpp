// ONNX export (docs/export.md): a model, with its weights, as an ONNX model for serving
// runtimes (opset 13, the default domain only), in inference behaviour: Dropout, noise and
// augmentation layers are left out, BatchNormalization uses its moving statistics.
//
// Each model input keeps its InputLayer's name (a Sequential model without one: "input") and
// each output its output layer's name, with "_1" (or the next free number) added where a name is
// already taken (a last layer named "input" in a model whose input is "input"); every input and
// output has a dynamic leading batch dimension ("batch") and Keras' per-sample shape (channels
// last, as Tandem's data). The result is checked by ONNX's own checker and shape inference before
// it is returned. Thread-compatible: one call at a time per model (it reads the model's weights).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tandem/error.hpp"
#include "tandem/layer.hpp"
#include "tandem/model.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::onnx_export {

/// Opset of the default ONNX domain the exporter writes.
inline constexpr std::int64_t kOpset = 13;

/// A layer (or one setting of it) that has no ONNX form; exit code 2.
class UnexportableLayer : public Error {
 public:
  UnexportableLayer(const Layer& layer, const std::string& why)
      : Error(ExitCode::bad_input, "layer '" + layer.name() + "' (" + layer.class_name() +
                                       ") cannot be exported to ONNX: " + why) {}
};

/// An exported model: the serialized ModelProto and the names of its graph's inputs and outputs
/// (the model's, made unique), in the model's order.
struct OnnxModel {
  std::string bytes;
  std::vector<std::string> input_names, output_names;
};

/// `model` as ONNX. `metadata` becomes the model's metadata_props (the checkpoint's class names,
/// where it came from). Throws UnexportableLayer (exit 2) naming the first layer with no ONNX
/// form, RunError if ONNX's checker refuses the result (a Tandem bug).
OnnxModel export_onnx(Model& model, const std::map<std::string, std::string>& metadata);

/// The Keras layer classes the exporter knows (every class Tandem builds has one).
std::vector<std::string> exportable_classes();

}  // namespace tandem::onnx_export

TANDEM_INTERNAL_API_END
