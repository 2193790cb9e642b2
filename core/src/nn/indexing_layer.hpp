// Private (nn): NumPy's basic indexing of a batch and its two reshapes — x[:, 0], x[..., 1:5],
// x[:, None], x[:, ::-1], expand_dims, squeeze — the functions called on Keras tensors that no
// Keras layer computes: tf.keras 2's SlicingOpLambda (x[...]) and TFOpLambda (tf.expand_dims,
// tf.squeeze) entries, Keras 3's GetItem, ExpandDims and Squeeze operations.
// nn/function_layers.hpp reads those entries into this layer's own ("TandemIndexing"); the model's
// config is written back with the entries as they were given.
//
// The index is read at build against the input's shape, the batch axis first, as NumPy reads it:
// an integer picks one position (negative: from the end) and drops its axis; a slice (start,
// stop, step, each optional; Python's clamping) keeps its axis; None adds an axis of length 1;
// one "..." stands for every axis the others leave (implied at the end). The batch axis stays
// whole. The output is a strided view of the input (Backend::gather_view), its gradient the
// scatter back into zeros; a view that keeps every value in order (expand_dims, squeeze, x[:, :])
// is a reshape and copies nothing. Ownership and threads: as every layer's (tandem/layer.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/strided_view_math.hpp"
#include "tandem/layer.hpp"
#include "util/config_object.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// One item of an index: x[item, item, ...].
struct IndexItem {
  enum class Kind { position, slice, new_axis, rest };
  Kind kind = Kind::rest;
  std::int64_t position = 0;                      // Kind::position
  std::optional<std::int64_t> start, stop, step;  // Kind::slice (unset: Python's None)

  static IndexItem at(std::int64_t p) { return {Kind::position, p, {}, {}, {}}; }
  static IndexItem all() { return {Kind::slice, 0, {}, {}, {}}; }
  static IndexItem new_axis() { return {Kind::new_axis, 0, {}, {}, {}}; }
  static IndexItem rest() { return {Kind::rest, 0, {}, {}, {}}; }
};

class Indexing : public Layer {
 public:
  /// x[items...].
  static std::unique_ptr<Indexing> indexing(std::string name, std::vector<IndexItem> items);
  /// np.expand_dims(x, axes): each axis (of the output, the batch as 0, negative from the end)
  /// a new one of length 1.
  static std::unique_ptr<Indexing> expanding(std::string name, std::vector<std::int64_t> axes);
  /// np.squeeze(x, axes): the axes (the batch as 0, negative from the end) dropped, each of
  /// length 1; without axes, every axis of length 1 after the batch.
  static std::unique_ptr<Indexing> squeezing(std::string name,
                                             std::optional<std::vector<std::int64_t>> axes);

  std::string class_name() const override { return "TandemIndexing"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

  /// What the built layer takes of each input axis after the batch: `count` positions from
  /// `start`, `step` apart (negative: backwards); `kept` unless an integer picked it.
  struct AxisPick {
    std::int64_t start = 0, count = 0, step = 1;
    bool kept = true;
  };
  const std::vector<AxisPick>& picks() const { return picks_; }
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return output_shape_; }

 private:
  enum class Mode { index, expand, squeeze };
  Indexing(std::string name, Mode mode) : Layer(std::move(name)), mode_(mode) {}
  /// The index this layer applies to inputs (batch, input...), its axes resolved.
  std::vector<IndexItem> index_for(const Shape& input) const;
  [[noreturn]] void refuse(const std::string& why) const;

  Mode mode_;
  std::vector<IndexItem> items_;    // Mode::index
  std::vector<std::int64_t> axes_;  // Mode::expand, Mode::squeeze
  bool every_unit_axis_ = false;    // Mode::squeeze without axes
  Shape input_shape_, output_shape_;
  std::vector<AxisPick> picks_;
  bool reshape_only_ = false;
  backend::StridedView view_;  // over a batch: its axis 0 the samples, set per call
  Tensor output_, grad_input_;
};

/// The layer of a "TandemIndexing" config entry: exactly one of "index" (a list of integers,
/// null, "..." and {"start", "stop", "step"} objects), "expand_axes" (a list of integers) and
/// "squeeze_axes" (a list of integers, or null for every axis of length 1). Throws ConfigError at
/// the key's path.
std::unique_ptr<Layer> make_indexing_layer(ConfigObject& config, const std::string& name);

/// An index as "x[:, 0, None, ...]" prints it.
std::string index_to_string(const std::vector<IndexItem>& items);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
