// Keras' EinsumDense: y = activation(einsum(equation, x, kernel) + bias), the kernel's and the
// output's axes named by the equation ("abc,cde->abde": a projection to heads), the bias over
// the output axes `bias_axes` names (broadcast over the others). Computed on its backend as a
// batch of GEMMs (nn/einsum_equation.hpp's plan): the input and the kernel arranged by axis
// swaps where the equation's order is not the products' (none for the common forms), the
// product arranged into the output's order, the bias added per sample, the activation over the
// last axis (softmax's too, as Keras applies it). Weights in Keras' shapes: `kernel` in the
// equation's kernel order, `bias` Keras' broadcastable shape. Ownership and threads: as every
// layer's (tandem/layer.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nn/activation_fn.hpp"
#include "nn/einsum_equation.hpp"
#include "nn/kernel_bias_keys.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct EinsumDenseOptions : KernelBiasKeys {
  std::string equation;
  EinsumSpecs specs;  // the equation's (split_einsum_equation)
  /// Keras' output_shape: the output's axes after the batch's, null where the input sizes them.
  std::vector<std::optional<std::int64_t>> output_shape;
  ActivationKind activation = ActivationKind::linear;
  std::optional<std::string> bias_axes;  // none: no bias
};

class EinsumDense : public Layer, public WeightRules, public KerasTwoDefinitions {
 public:
  EinsumDense(std::string name, EinsumDenseOptions options);
  std::string class_name() const override { return "EinsumDense"; }
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
  std::string who() const { return "layer '" + name() + "' (EinsumDense)"; }
  /// `t`, whose axes are the letters `from`, with its axes as `to`: t itself when the two agree,
  /// else permuted into `into`.
  const Tensor& arranged(const Tensor& t, const std::string& from, const std::string& to,
                         std::int64_t rows, Tensor& into);
  /// The bias as every sample adds it (the output's per-sample values) into bias_full_.
  void expand_bias();
  /// The bias's gradient from the output's (dz, rows × per-sample values).
  void bias_gradient(const Tensor& dz);
  /// Values per sample of the output.
  std::int64_t per_sample() const;
  bool keeps_product() const;

  EinsumDenseOptions options_;
  EinsumPlan plan_;
  Shape input_shape_;
  Parameter kernel_, bias_;
  Tensor input_;                   // the last forward's input (shared storage)
  const Tensor* x_smk_ = nullptr;  // it as [S, M, K]: input_ or x_perm_
  const Tensor* w_skn_ = nullptr;  // the kernel as [S, K, N]: kernel_.value or w_perm_
  Tensor x_perm_, w_perm_, product_, pre_, output_, scratch_;
  Tensor ones_, bias_rows_, bias_full_, bias_sums_, bias_arranged_;
  Tensor grad_pre_, dz_perm_, dw_perm_, dw_arranged_, dx_perm_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
