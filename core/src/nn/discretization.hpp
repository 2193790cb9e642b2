// Discretization, Keras semantics: each value to its bin among ascending bin_boundaries — how
// many boundaries are at most it (NumPy's digitize: bin 0 below the first boundary, the last
// bin from the last one on) — as an index ("int", default) or encoded over the
// len(bin_boundaries) + 1 bins as CategoryEncoding encodes ("one_hot", "multi_hot", "count").
// Keras 3 writes an adapted layer's boundaries in its config; one whose boundaries are still to
// be computed by adapt() (bin_boundaries null) is refused. No weights; no gradient (zeros to
// the input). Ownership and threads: as every layer's.
#pragma once

#include <optional>
#include <vector>

#include "nn/category_encoding.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Discretization : public Layer {
 public:
  /// `mode` none: "int". `boundaries` ascending (the factory checks).
  Discretization(std::string name, std::vector<float> boundaries, std::optional<CategoryMode> mode,
                 double epsilon);
  std::string class_name() const override { return "Discretization"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  std::vector<float> boundaries_;
  std::optional<CategoryMode> mode_;
  double epsilon_;
  Shape input_shape_;
  CategoryGeometry geometry_;
  Tensor placed_boundaries_;  // the boundaries on the layer's backend
  Tensor bins_, output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
