// Private (CUDA module): the CUDA backend (backend/ops.hpp) of one replica — one GPU, one stream.
// GEMMs through cuBLASLt (DenseGemm, at the run's precision), convolutions through cuDNN or an
// implicit im2col (cuda_convolution.cpp), everything else Tandem's kernels (cuda/ops/), whose
// per-element arithmetic is backend/kernel_math.hpp's, the CPU backend's own.
//
// Every operation queues work on the stream and returns, except where the ops interface needs a
// host answer: embedding_gather and encode_categories (their index checks), copy() to the host,
// Sums::read(). Such an operation marks the step as not capturable (captured_safely()), so the
// replica runs it without a CUDA graph. Dropout counts its calls on the device (one counter per
// layer, keyed by the layer's random stream), so a step replayed from a graph draws new masks.
//
// Ownership: shares the allocator with every tensor it allocated (they may outlive it); borrows
// the stream and the GEMM, which outlive it (the replica owns them). Thread-safety: one thread at
// a time (the replica's), with the replica's device current.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <memory>

#include "backend/ops.hpp"
#include "cuda/ops/dense_gemm.hpp"
#include "cuda/ops/device_allocator.hpp"

namespace tandem::cuda {

class CudaBackend final : public backend::Backend {
 public:
  CudaBackend(std::shared_ptr<DeviceAllocator> allocator, cudaStream_t stream, DenseGemm& gemm,
              Precision precision);
  ~CudaBackend() override;

  /// A backend on the same device, stream and allocator whose products run through `gemm` at
  /// `precision` (for the layers a Keras dtype policy keeps at float32 in a mixed-precision
  /// model). It shares this backend's memory (tensors move between the two without copies) and
  /// step state — whether the step stayed capturable, Dropout's call counters — so the replica
  /// sees one step across both. Borrows `gemm`, which must
  /// outlive it; it keeps the shared state alive itself.
  std::unique_ptr<CudaBackend> sibling(DenseGemm& gemm, Precision precision) const;

  Device device() const override;
  std::shared_ptr<DeviceMemory> memory() const override { return memory_; }
  cudaStream_t stream() const { return stream_; }
  DeviceAllocator& allocator() { return *allocator_; }
  Precision precision() const { return precision_; }
  DenseGemm& gemm_engine() { return gemm_; }

  /// False once an operation since the last reset needed the host (see above).
  bool captured_safely() const { return step_->captured_safely; }
  void reset_capture_check() { step_->captured_safely = true; }

  /// Dropout's call counts on the device, by random stream: read back (synchronizes), and set
  /// (queued on the stream: a pipeline stage resets them before every micro-batch).
  std::map<std::uint64_t, std::uint64_t> dropout_calls();
  void set_dropout_calls(std::uint64_t stream, std::uint64_t calls);
  /// Counts one training call of every Dropout layer seen so far (a step with no rows here).
  void count_dropout_calls();

  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& t, float value) override;
  void gemm(const backend::GemmDesc& desc, const Tensor& a, const Tensor& b, const Tensor* bias,
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
  void shaped_activation_forward(const backend::ShapedActivation& a, const Tensor& x,
                                 Tensor& y) override;
  void shaped_activation_backward(const backend::ShapedActivation& a, const Tensor& x,
                                  const Tensor& dy, Tensor& dx) override;
  void prelu_forward(const backend::PreluDesc& desc, const Tensor& x, const Tensor& alpha,
                     Tensor& y) override;
  void apply_constraint(const backend::ConstraintDesc& desc, Tensor& w) override;
  void penalty_sum(const Tensor& w, float l1, float l2, backend::Sums& sums,
                   std::size_t slot) override;
  void add_penalty_gradient(const Tensor& w, float l1, float l2, Tensor& grad) override;
  void prelu_backward(const backend::PreluDesc& desc, const Tensor& x, const Tensor& alpha,
                      const Tensor& dy, Tensor* dx, Tensor* d_alpha) override;
  void masked_softmax(const backend::AttentionMaskDesc& desc, const Tensor& scores,
                      const Tensor* mask, Tensor& probs) override;
  void masked_softmax_backward(const backend::AttentionMaskDesc& desc, const Tensor& probs,
                               const Tensor* mask, const Tensor& d_probs,
                               Tensor& d_scores) override;
  void additive_pairs(const backend::AdditiveScoresDesc& desc, const Tensor& query,
                      const Tensor& key, const Tensor* factor, Tensor& pairs) override;
  void additive_scores(const backend::AdditiveScoresDesc& desc, const Tensor& pairs,
                       const Tensor* weights, Tensor& scores) override;
  void additive_scores_backward(const backend::AdditiveScoresDesc& desc, const Tensor& query,
                                const Tensor& key, const Tensor& pairs, const Tensor* weights,
                                const Tensor* factor, const Tensor& d_scores, Tensor* d_query,
                                Tensor* d_key, Tensor* weight_parts, Tensor* factor_parts) override;
  void unit_normalize(const backend::UnitNormDesc& desc, const Tensor& x, Tensor& y) override;
  void unit_normalize_backward(const backend::UnitNormDesc& desc, const Tensor& x, const Tensor& dy,
                               Tensor& dx) override;
  void swap_middle_axes(const Tensor& x, const std::array<std::int64_t, 4>& dims,
                        Tensor& y) override;
  void gather_view(const backend::StridedView& view, const Tensor& src, Tensor& dst) override;
  void scatter_view(const backend::StridedView& view, const Tensor& src, Tensor& dst) override;
  void copy_image_block(const backend::ImageBlock& block, const Tensor& src,
                        Tensor& dst) override;
  void upsample_forward(const backend::UpsampleDesc& desc, const Tensor& x, Tensor& y) override;
  void flip_images(const backend::FlipDesc& desc, const Tensor& draws, const Tensor& x,
                   Tensor& y) override;
  void warp_images(const backend::WarpDesc& desc, const Tensor& draws, const Tensor& x,
                   Tensor& y) override;
  void warp_images_backward(const backend::WarpDesc& desc, const Tensor& draws, const Tensor& dy,
                            Tensor& dx) override;
  void adjust_images(const backend::AdjustDesc& desc, const Tensor& draws, const Tensor& x,
                     Tensor& means, Tensor& y) override;
  void adjust_images_backward(const backend::AdjustDesc& desc, const Tensor& draws,
                              const Tensor& x, const Tensor& means, const Tensor& dy,
                              Tensor& dx) override;
  void upsample_backward(const backend::UpsampleDesc& desc, const Tensor& dy,
                         Tensor& dx) override;
  void layer_norm_forward(const backend::LayerNormDesc& desc, const Tensor& x, const Tensor* gamma,
                          const Tensor* beta, Tensor& y, Tensor& stats) override;
  void layer_norm_backward(const backend::LayerNormDesc& desc, const Tensor& x, const Tensor& dy,
                           const Tensor* gamma, const Tensor& stats, Tensor* dx, Tensor* d_gamma,
                           Tensor* d_beta) override;
  void sequence_mask(const Tensor& x, float value, std::int64_t features, Tensor& mask) override;
  void select_rows(const Tensor& mask, const Tensor& a, const Tensor* b, Tensor& out,
                   std::int64_t cols) override;
  void masked_average_steps(const Tensor& x, const Tensor& mask, Tensor& y, std::int64_t steps,
                            std::int64_t channels) override;
  void masked_average_steps_backward(const Tensor& dy, const Tensor& mask, Tensor& dx,
                                     std::int64_t steps, std::int64_t channels) override;
  void lstm_step_forward(const backend::RecurrentCellDesc& desc, const Tensor& xw,
                         const Tensor& rec, const Tensor& c_prev, Tensor& pre, Tensor& c,
                         Tensor& h) override;
  void lstm_step_backward(const backend::RecurrentCellDesc& desc, const Tensor& pre,
                          const Tensor& c_prev, const Tensor& c, const Tensor& dh, Tensor& dc,
                          Tensor& d_pre) override;
  void gru_step_forward(const backend::RecurrentCellDesc& desc, const Tensor& xw, const Tensor& rec,
                        const Tensor& h_prev, Tensor& pre, Tensor& h) override;
  void gru_step_backward(const backend::RecurrentCellDesc& desc, const Tensor& pre,
                         const Tensor& h_prev, const Tensor& dh, Tensor& d_xw, Tensor& d_rec,
                         Tensor& dh_prev) override;
  void copy_columns(const Tensor& src, std::int64_t src_cols, std::int64_t src_offset, Tensor& dst,
                    std::int64_t dst_cols, std::int64_t dst_offset, std::int64_t width) override;
  void activation_forward(backend::ActivationKind kind, const Tensor& in, Tensor& out,
                          std::int64_t cols) override;
  void activation_backward(backend::ActivationKind kind, const Tensor& in, const Tensor& out,
                           const Tensor& grad_out, Tensor& grad_in, std::int64_t cols) override;
  void dropout_forward(const backend::DropoutDesc& desc, const Tensor& x, Tensor& y, Tensor& mask,
                       std::int64_t cols) override;
  void normal_noise(const backend::DropoutDesc& desc, Tensor& noise, std::int64_t cols) override;
  void uniform_noise(const backend::DropoutDesc& desc, Tensor& noise, std::int64_t cols) override;
  std::unique_ptr<backend::Convolution2D> convolution(
      const backend::ConvolutionDesc& desc) override;
  std::unique_ptr<backend::Pooling2D> pooling(const backend::PoolingDesc& desc) override;
  std::unique_ptr<backend::BatchNorm> batch_norm(const backend::BatchNormDesc& desc) override;
  void global_average_pool_forward(const Tensor& x, Tensor& y, std::int64_t cells,
                                   std::int64_t channels) override;
  void global_average_pool_backward(const Tensor& dy, Tensor& dx, std::int64_t cells,
                                    std::int64_t channels) override;
  void spectral_normalize(const backend::SpectralNormDesc& desc, Tensor& kernel,
                          Tensor& u) override;
  void adaptive_pool_forward(const backend::AdaptivePoolDesc& desc, const Tensor& x, Tensor& y,
                             Tensor& arg) override;
  void adaptive_pool_backward(const backend::AdaptivePoolDesc& desc, const Tensor& dy,
                              const Tensor& arg, Tensor& dx) override;
  void discretize(const Tensor& x, const Tensor& boundaries, Tensor& y) override;
  std::optional<backend::BadIndex> lookup(const backend::math::LookupDesc& desc, const Tensor& x,
                                          const Tensor& keys, const Tensor& values,
                                          Tensor& y) override;
  std::optional<backend::BadIndex> encode_categories(const Tensor& x, Tensor& y, std::int64_t n,
                                                     std::int64_t inner, std::int64_t depth,
                                                     bool count) override;
  std::optional<backend::BadIndex> embedding_gather(const Tensor& table, const Tensor& x,
                                                    Tensor& y, std::int64_t dim) override;
  void embedding_gradient(const Tensor& x, const Tensor& dy, Tensor& grad,
                          std::int64_t dim) override;
  std::unique_ptr<backend::Sums> sums() override;
  void loss_sum(const backend::LossDesc& desc, const Tensor& pred, const Tensor& target,
                const backend::WeightTensors& weights, std::int64_t cols, float grad_scale,
                Tensor* grad, backend::Sums& sums, std::size_t slot) override;
  void metric_sum(const backend::MetricDesc& desc, const Tensor& pred, const Tensor& target,
                  const backend::WeightTensors& weights, std::int64_t cols, backend::Sums& sums,
                  std::size_t slot) override;
  void metric_histogram(const backend::MetricDesc& desc, const Tensor& pred, const Tensor& target,
                        const backend::WeightTensors& weights, std::int64_t cols,
                        backend::Sums& sums, std::size_t first_slot) override;
  void optimizer_update(const backend::OptimizerDesc& desc, std::int64_t step, double lr,
                        const std::vector<backend::UpdateTensors>& params) override;

 private:
  /// The device counter of desc's random stream, made at desc.call on its first use.
  std::uint64_t* call_counter(const backend::DropoutDesc& desc);
  /// A device scratch buffer of at least `floats` floats, reused across calls.
  float* scratch(DeviceBuffer& buffer, std::int64_t floats);
  // x's values as int32 indices in indices_ (0 where invalid), checked on the host (the step
  // cannot be captured then): the first that is no integer in [0, limit), named by `what`.
  // The first position a kernel flagged in `flag` (atomicMin; x.size() when none) and x's value
  // there, read on the host now (the step cannot be captured then); nullopt when none was.
  std::optional<backend::BadIndex> first_flagged(const unsigned long long* flag, const Tensor& x,
                                                 const std::string& what);
  std::optional<backend::BadIndex> device_indices(const Tensor& x, std::int64_t limit,
                                                  const std::string& what);
  void require(const Tensor& t, const char* operation) const;

  std::shared_ptr<DeviceAllocator> allocator_;
  std::shared_ptr<DeviceMemory> memory_;
  cudaStream_t stream_;
  DenseGemm& gemm_;
  Precision precision_;
  // What the backends of one replica share (sibling()).
  struct StepState {
    bool captured_safely = true;
    std::map<std::uint64_t, DeviceBuffer> dropout_calls;  // random stream -> its device counter
  };
  std::shared_ptr<StepState> step_ = std::make_shared<StepState>();
  DeviceBuffer column_scratch_, indices_, flag_, embedding_work_, embedding_starts_,
      embedding_sort_, row_values_, row_counts_, optimizer_scratch_, constraint_scales_,
      penalty_values_, finite_flag_, spectral_scratch_;
};

}  // namespace tandem::cuda
