// Keras' SpectralNormalization wrapper (Keras 3; tf.keras 2.13+): a layer with a kernel (Dense,
// the convolutions, EinsumDense) or embeddings (Embedding) whose weight is divided, at every
// training forward, by its spectral norm as the power iteration estimates it — W seen as
// (elements / n, n) with n its last axis, u (1, n) the non-trainable weight `vector_u`
// (TruncatedNormal, stddev 0.02): `power_iterations` times v = normalize(u Wᵀ), u = normalize(v
// W); σ = v W uᵀ; W /= σ and u kept (both unchanged while W is all zeros). Keras assigns the
// divided kernel to the layer's variable, so the division is the weight's new value, not a step
// of the gradient: the wrapped layer then runs as it would, its gradient that of the weight it
// used. Inference runs the wrapped layer on the weight as it stands.
//
// Every replica divides its own copy of the weight by the same σ (the same weight and u, the
// same arithmetic), so the replicas stay equal. Weights: the wrapped layer's (Keras 2 names
// them under the wrapper; Keras 3 keeps them under the attribute `layer`), then vector_u.
// Computes on its backend (spectral_normalize). Ownership and threads: as every layer's.
#pragma once

#include <memory>

#include "backend/ops.hpp"
#include "nn/layer_wrapper.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class SpectralNormalization : public LayerWrapper {
 public:
  SpectralNormalization(std::string name, std::unique_ptr<Layer> inner, int power_iterations);
  std::string class_name() const override { return "SpectralNormalization"; }
  /// Throws ShapeError naming the layer when the wrapped one has no kernel nor embeddings.
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;

  /// After build: the shapes the wrapped layer takes and gives (the wrapper's own).
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return output_shape_; }

 private:
  int power_iterations_;
  Parameter* kernel_ = nullptr;  // the wrapped layer's kernel or embeddings (after build)
  Parameter vector_u_;
  backend::SpectralNormDesc desc_;
  Shape input_shape_, output_shape_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
