// Dot, Keras semantics (keras.layers.Dot, batch_dot): the dot products of two inputs' samples
// along one axis of each. Per sample, 2-D inputs (batch, n) give (batch, 1); 3-D inputs are
// matrices, and `axes` picks the contracted axis of each (1 or 2; -1 is the last), so (b, t, d)
// · (b, s, d) with axes 2 is (b, t, s), as attention scores are. Computed as one batched GEMM
// on the backend, its gradients as two more. With `normalize` (cosine proximity) each input is
// first L2-normalized along its contracted axis (the backend's unit_normalize, its gradient
// through unit_normalize_backward): Keras 3 bounds the inverse norm by 1 / 1e-7 (ops.normalize),
// tf.keras 2 floors the square sum at 1e-12 (tf.math.l2_normalize) — a Keras 2 model's Dot takes
// the latter (use_keras2_definitions). Ownership and threads: as every layer's; the inputs are
// borrowed until the backward.
#pragma once

#include <array>

#include "backend/ops.hpp"
#include "nn/layer_extensions.hpp"
#include "nn/merge.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Dot : public MergeLayer, public KerasTwoDefinitions {
 public:
  /// `axes` as Keras counts them (the batch axis is 0; -1 the last), one per input.
  Dot(std::string name, std::array<int, 2> axes, bool normalize)
      : MergeLayer(std::move(name)), axes_(axes), normalize_(normalize) {}
  std::string class_name() const override { return "Dot"; }
  Shape build_inputs(const std::vector<Shape>& input_shapes, Rng& init) override;
  const Tensor& forward_inputs(const std::vector<const Tensor*>& inputs, bool training) override;
  std::vector<const Tensor*> backward_inputs(const Tensor& grad_output,
                                             bool need_input_grad) override;
  nlohmann::json config() const override;
  void use_keras2_definitions() override { square_floor_ = 1e-12; }

 private:
  backend::GemmDesc product(std::int64_t batch) const;
  backend::UnitNormDesc along(const Shape& shape, int axis) const;

  std::array<int, 2> axes_;
  bool normalize_;
  double square_floor_ = 1e-14;                // Keras 3's (1e-7)²; see above
  std::array<backend::UnitNormDesc, 2> unit_;  // each input's groups along its contracted axis
  std::array<Tensor, 2> normalized_, normalized_grads_;
  std::vector<Shape> input_shapes_;
  Shape output_shape_;
  bool trans_a_ = false, trans_b_ = false;  // whether each input's contracted axis is its first
  std::int64_t m_ = 0, n_ = 0, k_ = 0;      // free sizes of the inputs, contracted size
  std::vector<const Tensor*> inputs_seen_;
  Tensor output_;
  std::array<Tensor, 2> grads_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
