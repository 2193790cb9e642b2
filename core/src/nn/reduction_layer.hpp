// Private (nn): a sum, mean, maximum or minimum over adjacent axes of each sample —
// tf.math.reduce_sum / reduce_mean / reduce_max / reduce_min and Keras 3's keras.ops.sum / mean /
// max / min called on Keras tensors over axes no global pooling layer covers (the last one, a
// middle one). No Keras layer computes these, so this layer is Tandem's own ("TandemReduction");
// nn/function_layers.hpp reads the entries into it and the model's config is written back with
// the entries as given.
//
// The axes (counting the batch as 0, negative from the end) must be one block of adjacent axes
// after the batch: each sample is seen as (outer, cells, inner), and the backend's adaptive
// pooling to one cell computes the mean or the maximum over the cells (the maximum's gradient
// goes to its first position, as PyTorch's max); the sum is the mean times the cells (within
// float rounding of a sum taken in order), the minimum the negated maximum of the negated input.
// Ownership and threads: as every layer's (tandem/layer.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/adaptive_pool_math.hpp"
#include "tandem/layer.hpp"
#include "util/config_object.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Reduction : public Layer {
 public:
  enum class Kind { sum, mean, max, min };
  /// `axes` as given (the batch as 0, negative from the end); `keepdims`: the reduced axes stay,
  /// of length 1.
  Reduction(std::string name, Kind kind, std::vector<std::int64_t> axes, bool keepdims)
      : Layer(std::move(name)), kind_(kind), axes_(std::move(axes)), keepdims_(keepdims) {}
  std::string class_name() const override { return "TandemReduction"; }
  /// Throws ShapeError naming the layer for an axis the input lacks, the batch axis, or axes
  /// that are not one block.
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

  Kind kind() const { return kind_; }
  /// The built layer's axes: sorted, counting the batch as 0.
  const std::vector<std::int64_t>& axes() const { return resolved_; }
  bool keepdims() const { return keepdims_; }

 private:
  [[noreturn]] void refuse(const std::string& why) const;

  Kind kind_;
  std::vector<std::int64_t> axes_, resolved_;
  bool keepdims_;
  Shape input_shape_, output_shape_;
  std::int64_t outer_ = 1, cells_ = 1, inner_ = 1;  // each sample as (outer, cells, inner)
  backend::AdaptivePoolDesc desc_;                  // its batch set per call
  Tensor negated_, output_, arg_, scaled_, grad_input_;
};

/// The layer of a "TandemReduction" config entry: "reduction" ("sum", "mean", "max", "min"),
/// "axes" (a list of integers) and "keepdims" (default false). Throws ConfigError at the key.
std::unique_ptr<Layer> make_reduction_layer(ConfigObject& config, const std::string& name);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
