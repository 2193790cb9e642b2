// Dense: y = activation(x · kernel + bias), Keras semantics (kernel is (in, units)); applied to the
// last axis, so (batch, ..., in) -> (batch, ..., units). Computes on its backend: the GEMM with
// the bias (and a relu) in its epilogue, other activations as one operation over the product.
#pragma once

#include "backend/ops.hpp"
#include "nn/activation_fn.hpp"
#include "nn/dense_products_of.hpp"
#include "nn/kernel_bias_keys.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct DenseOptions : KernelBiasKeys {
  std::int64_t units = 0;
  ActivationKind activation = ActivationKind::linear;
  bool use_bias = true;
};

class Dense : public Layer, public WeightRules, public KerasTwoDefinitions {
 public:
  Dense(std::string name, DenseOptions options);
  std::string class_name() const override { return "Dense"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;
  std::vector<RuledWeight> ruled_weights() override;

  void use_keras2_definitions() override {
    options_.activation = keras2_definition(options_.activation);
  }

 private:
  DenseOptions options_;
  std::int64_t in_features_ = 0;
  Parameter kernel_, bias_;
  /// Whether the activation runs in the GEMM's epilogue (linear; relu with a bias).
  bool fused() const;
  /// Whether the forward keeps the product (pre_) for the activation's derivative: only when the
  /// activation is neither fused nor differentiable from its output.
  bool keeps_product() const;
  backend::GemmEpilogue epilogue() const;
  /// The backend's op object for the products, made for the current backend.
  backend::DenseProducts& products();

  Tensor input_;   // the last forward's input (shared storage, not a copy)
  Tensor pre_;     // x·W + b (only when keeps_product())
  Tensor output_;  // activation(pre_)
  Tensor grad_pre_, grad_input_;
  DenseProductsOf products_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
