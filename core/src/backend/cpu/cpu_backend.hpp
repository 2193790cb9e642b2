// Private: the CPU backend (backend/ops.hpp) — oneDNN for GEMM, convolution, pooling and the
// transcendental activations, OpenMP loops around backend/kernel_math.hpp for the rest.
//
// Its members are defined by topic: cpu_backend.cpp (movement, GEMM, activations, dropout,
// embedding, global pooling), elementwise.cpp (the merging layers' arithmetic), attention.cpp,
// layer_norm.cpp, recurrent.cpp (LSTM and GRU steps, sequence masks), image_blocks.cpp (padding,
// cropping, upsampling), strided_views.cpp (indexing), dense_products.cpp, convolution.cpp,
// pooling.cpp, batch_norm.cpp, loss_ops.cpp (losses, metrics, sums) and optimizer_ops.cpp. Every
// parallel loop splits its work by the shapes alone and sums in a fixed order: results never depend
// on the thread count.
//
// Two instances exist, cpu_backend()'s (float32 products) and cpu_backend(Precision::bf16)'s
// (bfloat16 operands for GEMMs and convolutions, float32 sums; everything else is the same).
//
// Ownership: the process-wide instances are cpu_backend()'s. Thread-safety: no state between
// calls (the op objects it makes keep theirs); any thread.
#pragma once

#include "backend/ops.hpp"

namespace tandem::backend {

class CpuBackend final : public Backend {
 public:
  /// `bf16_products`: GEMMs and convolutions round their operands to bfloat16.
  explicit CpuBackend(bool bf16_products) : bf16_products_(bf16_products) {}
  Device device() const override { return {}; }
  std::shared_ptr<DeviceMemory> memory() const override { return nullptr; }

  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& t, float value) override;
  void gemm(const GemmDesc& desc, const Tensor& a, const Tensor& b, const Tensor* bias,
            Tensor& c) override;
  void column_sums(const Tensor& x, std::int64_t cols, Tensor& out) override;
  void multiply(const Tensor& a, const Tensor& b, Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void add_relu(const Tensor& a, const Tensor& b, Tensor& out) override;
  void subtract(const Tensor& a, const Tensor& b, Tensor& out) override;
  void affine(const Tensor& x, float scale, float offset, Tensor& out) override;
  bool scale_checking_finite(Tensor& values, float factor) override;
  void normalization_factors(const Tensor& mean, const Tensor& variance, bool invert, Tensor& scale,
                             Tensor& shift) override;
  void column_affine(const Tensor& x, const Tensor& scale, const Tensor* shift, Tensor& y,
                     std::int64_t cols) override;
  void extreme_update(bool maximum, const Tensor& x, int index, Tensor& out,
                      Tensor& winner) override;
  void route_gradient(const Tensor& winner, int index, const Tensor& dy, Tensor& dx) override;
  void copy_columns(const Tensor& src, std::int64_t src_cols, std::int64_t src_offset, Tensor& dst,
                    std::int64_t dst_cols, std::int64_t dst_offset, std::int64_t width) override;
  void activation_forward(ActivationKind kind, const Tensor& in, Tensor& out,
                          std::int64_t cols) override;
  void activation_backward(ActivationKind kind, const Tensor& in, const Tensor& out,
                           const Tensor& grad_out, Tensor& grad_in, std::int64_t cols) override;
  void shaped_activation_forward(const ShapedActivation& a, const Tensor& x, Tensor& y) override;
  void shaped_activation_backward(const ShapedActivation& a, const Tensor& x, const Tensor& dy,
                                  Tensor& dx) override;
  void prelu_forward(const PreluDesc& desc, const Tensor& x, const Tensor& alpha,
                     Tensor& y) override;
  void apply_constraint(const ConstraintDesc& desc, Tensor& w) override;
  void penalty_sum(const Tensor& w, float l1, float l2, Sums& sums, std::size_t slot) override;
  void add_penalty_gradient(const Tensor& w, float l1, float l2, Tensor& grad) override;
  void prelu_backward(const PreluDesc& desc, const Tensor& x, const Tensor& alpha,
                      const Tensor& dy, Tensor* dx, Tensor* d_alpha) override;
  void masked_softmax(const AttentionMaskDesc& desc, const Tensor& scores, const Tensor* mask,
                      Tensor& probs) override;
  void masked_softmax_backward(const AttentionMaskDesc& d, const Tensor& probs, const Tensor* mask,
                               const Tensor& d_probs, Tensor& d_scores) override;
  void additive_pairs(const AdditiveScoresDesc& desc, const Tensor& query, const Tensor& key,
                      const Tensor* factor, Tensor& pairs) override;
  void additive_scores(const AdditiveScoresDesc& desc, const Tensor& pairs, const Tensor* weights,
                       Tensor& scores) override;
  void additive_scores_backward(const AdditiveScoresDesc& desc, const Tensor& query,
                                const Tensor& key, const Tensor& pairs, const Tensor* weights,
                                const Tensor* factor, const Tensor& d_scores, Tensor* d_query,
                                Tensor* d_key, Tensor* weight_parts, Tensor* factor_parts) override;
  void unit_normalize(const UnitNormDesc& desc, const Tensor& x, Tensor& y) override;
  void unit_normalize_backward(const UnitNormDesc& desc, const Tensor& x, const Tensor& dy,
                               Tensor& dx) override;
  void swap_middle_axes(const Tensor& x, const std::array<std::int64_t, 4>& dims,
                        Tensor& y) override;
  void dropout_forward(const DropoutDesc& desc, const Tensor& x, Tensor& y, Tensor& mask,
                       std::int64_t cols) override;
  void normal_noise(const DropoutDesc& desc, Tensor& noise, std::int64_t cols) override;
  void uniform_noise(const DropoutDesc& desc, Tensor& noise, std::int64_t cols) override;
  void layer_norm_forward(const LayerNormDesc& desc, const Tensor& x, const Tensor* gamma,
                          const Tensor* beta, Tensor& y, Tensor& stats) override;
  void layer_norm_backward(const LayerNormDesc& desc, const Tensor& x, const Tensor& dy,
                           const Tensor* gamma, const Tensor& stats, Tensor* dx, Tensor* d_gamma,
                           Tensor* d_beta) override;
  void sequence_mask(const Tensor& x, float value, std::int64_t features, Tensor& mask) override;
  void select_rows(const Tensor& mask, const Tensor& a, const Tensor* b, Tensor& out,
                   std::int64_t cols) override;
  void masked_average_steps(const Tensor& x, const Tensor& mask, Tensor& y, std::int64_t steps,
                            std::int64_t channels) override;
  void masked_average_steps_backward(const Tensor& dy, const Tensor& mask, Tensor& dx,
                                     std::int64_t steps, std::int64_t channels) override;
  void lstm_step_forward(const RecurrentCellDesc& desc, const Tensor& xw, const Tensor& rec,
                         const Tensor& c_prev, Tensor& pre, Tensor& c, Tensor& h) override;
  void lstm_step_backward(const RecurrentCellDesc& desc, const Tensor& pre, const Tensor& c_prev,
                          const Tensor& c, const Tensor& dh, Tensor& dc, Tensor& d_pre) override;
  void gru_step_forward(const RecurrentCellDesc& desc, const Tensor& xw, const Tensor& rec,
                        const Tensor& h_prev, Tensor& pre, Tensor& h) override;
  void gru_step_backward(const RecurrentCellDesc& desc, const Tensor& pre, const Tensor& h_prev,
                         const Tensor& dh, Tensor& d_xw, Tensor& d_rec, Tensor& dh_prev) override;
  void gather_view(const StridedView& view, const Tensor& src, Tensor& dst) override;
  void scatter_view(const StridedView& view, const Tensor& src, Tensor& dst) override;
  void copy_image_block(const ImageBlock& block, const Tensor& src, Tensor& dst) override;
  void upsample_forward(const UpsampleDesc& desc, const Tensor& x, Tensor& y) override;
  void flip_images(const FlipDesc& desc, const Tensor& draws, const Tensor& x,
                   Tensor& y) override;
  void warp_images(const WarpDesc& desc, const Tensor& draws, const Tensor& x,
                   Tensor& y) override;
  void warp_images_backward(const WarpDesc& desc, const Tensor& draws, const Tensor& dy,
                            Tensor& dx) override;
  void adjust_images(const AdjustDesc& desc, const Tensor& draws, const Tensor& x, Tensor& means,
                     Tensor& y) override;
  void adjust_images_backward(const AdjustDesc& desc, const Tensor& draws, const Tensor& x,
                              const Tensor& means, const Tensor& dy, Tensor& dx) override;
  void upsample_backward(const UpsampleDesc& desc, const Tensor& dy, Tensor& dx) override;
  std::unique_ptr<DenseProducts> dense_products(const DenseProductDesc& desc) override;
  std::unique_ptr<Convolution2D> convolution(const ConvolutionDesc& desc) override;
  std::unique_ptr<Pooling2D> pooling(const PoolingDesc& desc) override;
  std::unique_ptr<BatchNorm> batch_norm(const BatchNormDesc& desc) override;
  void global_average_pool_forward(const Tensor& x, Tensor& y, std::int64_t cells,
                                   std::int64_t channels) override;
  void global_average_pool_backward(const Tensor& dy, Tensor& dx, std::int64_t cells,
                                    std::int64_t channels) override;
  void spectral_normalize(const SpectralNormDesc& desc, Tensor& kernel, Tensor& u) override;
  void adaptive_pool_forward(const AdaptivePoolDesc& desc, const Tensor& x, Tensor& y,
                             Tensor& arg) override;
  void adaptive_pool_backward(const AdaptivePoolDesc& desc, const Tensor& dy, const Tensor& arg,
                              Tensor& dx) override;
  void discretize(const Tensor& x, const Tensor& boundaries, Tensor& y) override;
  std::optional<BadIndex> lookup(const math::LookupDesc& desc, const Tensor& x, const Tensor& keys,
                                 const Tensor& values, Tensor& y) override;
  std::optional<BadIndex> encode_categories(const Tensor& x, Tensor& y, std::int64_t n,
                                            std::int64_t inner, std::int64_t depth,
                                            bool count) override;
  std::optional<BadIndex> embedding_gather(const Tensor& table, const Tensor& x, Tensor& y,
                                           std::int64_t dim) override;
  void embedding_gradient(const Tensor& x, const Tensor& dy, Tensor& grad,
                          std::int64_t dim) override;
  std::unique_ptr<Sums> sums() override;
  void loss_sum(const LossDesc& desc, const Tensor& pred, const Tensor& target,
                const WeightTensors& weights, std::int64_t cols, float grad_scale, Tensor* grad,
                Sums& sums, std::size_t slot) override;
  void metric_sum(const MetricDesc& desc, const Tensor& pred, const Tensor& target,
                  const WeightTensors& weights, std::int64_t cols, Sums& sums,
                  std::size_t slot) override;
  void metric_histogram(const MetricDesc& desc, const Tensor& pred, const Tensor& target,
                        const WeightTensors& weights, std::int64_t cols, Sums& sums,
                        std::size_t first_slot) override;
  void optimizer_update(const OptimizerDesc& desc, std::int64_t step, double lr,
                        const std::vector<UpdateTensors>& params) override;

 private:
  bool bf16_products_;
};

}  // namespace tandem::backend
