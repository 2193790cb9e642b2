// Keras' PReLU layer: y = x where x > 0, else alpha·x, with a learned alpha per input value
// (the sample's shape), shared along `shared_axes` (Keras' axes, 1 = the first after the batch
// axis; PReLU(shared_axes=[1, 2]) after a Conv2D learns one alpha per channel). The arithmetic
// is kernel_math's prelu_*, on the layer's backend. Ownership and threads: as every layer's.
#pragma once

#include <vector>

#include "backend/ops.hpp"
#include "nn/initializer.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class PReLU : public Layer {
 public:
  PReLU(std::string name, Initializer alpha_initializer, std::vector<std::int64_t> shared_axes);
  std::string class_name() const override { return "PReLU"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override { return {&alpha_}; }
  nlohmann::json config() const override;

 private:
  Initializer alpha_initializer_;
  std::vector<std::int64_t> shared_axes_;  // Keras' axes, as the config gives them
  backend::PreluDesc desc_;
  Shape input_shape_;
  Parameter alpha_;
  Tensor input_;  // the last forward's input (shared storage)
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
