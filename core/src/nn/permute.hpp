// Keras' Permute: the per-sample axes in another order (dims, counted from 1: Permute((2, 1))
// turns (steps, features) into (features, steps)). Computed as a chain of swaps of two adjacent
// axes (backend swap_middle_axes), the fewest that sort the axes; its gradient the inverse
// permutation, the same way. Ownership and threads: as every layer's (tandem/layer.hpp).
#pragma once

#include <vector>

#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Permute : public Layer {
 public:
  /// `order[i]`: the input axis (from 0, the batch not counted) that becomes axis i.
  Permute(std::string name, std::vector<int> order)
      : Layer(std::move(name)), order_(std::move(order)) {}
  std::string class_name() const override { return "Permute"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;
  /// Keras' dims (from 1).
  std::vector<int> dims() const;

 private:
  /// `from` (batch, shape...) with its axes put in `order` into `to`, through `scratch`.
  void permute(const Tensor& from, const Shape& shape, const std::vector<int>& order, Tensor& to,
               Tensor& scratch);

  std::vector<int> order_, inverse_;
  Shape input_shape_, output_shape_;
  Tensor output_, grad_input_, scratch_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
