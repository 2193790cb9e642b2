// The CUDA replica (parallel/replica.hpp): a copy of the host model resident on one GPU.
//
// Layout: every parameter lives in one flat device array of values, trainable ones first (in
// trainable_parameters() order), each starting on a 256-byte boundary (cuBLASLt's preferred
// alignment; the gaps stay zero); the gradients and each optimizer slot are flat arrays of the
// same layout as the trainable part, so one fused optimizer launch and one all-reduce cover every
// parameter. A step: the batch to the device, each layer's forward, the loss and metrics per row,
// their sums in double, each layer's backward; one copy of the sums back and one synchronization.
//
// The host model and optimizer are a mirror: after a step they are stale, and pull() copies the
// device state back (weights, non-trainable statistics, optimizer slots, Dropout call counts)
// only then; the learning rate and iteration count are host numbers kept current at every step.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "cuda/cuda_module_api.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/dense_gemm.hpp"
#include "cuda/ops/device_allocator.hpp"
#include "cuda/ops/device_math.hpp"
#include "cuda/ops/device_specs.hpp"
#include "cuda/ops/kernels.hpp"
#include "cuda/ops/losses.hpp"
#include "cuda/ops/metrics.hpp"
#include "cuda/ops/optimizer_update.hpp"
#include "cuda/replica/device_layer.hpp"
#include "tandem/error.hpp"

namespace tandem::detail {

namespace {

constexpr std::int64_t kAlign = 64;  // floats: 256 bytes

std::int64_t aligned(std::int64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

cuda::Precision device_precision(Precision p) {
  return p == Precision::tf32 ? cuda::Precision::tf32 : cuda::Precision::fp32;
}

// Makes `device` current for the calling thread (each replica's worker thread drives one GPU).
void use_device(int device) {
  cuda::check(cudaSetDevice(device), "cudaSetDevice");
}

class CudaReplica : public Replica {
 public:
  CudaReplica(Model& model, Optimizer& optimizer, DeviceSpec device, Precision precision)
      : model_(model), optimizer_(optimizer), device_(device) {
    use_device(device_.index);
    cuda::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    try {
      build(precision);
    } catch (...) {
      release();
      throw;
    }
  }

  ~CudaReplica() override { release(); }

  DeviceSpec device() const override { return device_; }
  Model& model() override { return model_; }
  Optimizer& optimizer() override { return optimizer_; }

  StepSums train(const Tensor& x, const Tensor& y, std::int64_t sample_offset, float loss_scale,
                 const Loss& loss, const Metrics& metrics) override {
    use_device(device_.index);
    const float* out = forward(x, y, sample_offset, true, &loss);
    const std::int64_t rows = x.dim(0);
    if (rows > 0) {
      loss_grad_.resize(*allocator_, rows * out_cols_);
      cuda::loss_rows(loss_spec(loss), out, y_.data(), rows, out_cols_, loss_scale,
                      row_loss_.data(), loss_grad_.data(), stream_);
    }
    const StepSums sums = reduce_sums(out, rows, metrics);
    if (rows > 0) {
      const float* grad = loss_grad_.data();
      for (std::size_t l = layers_.size(); l-- > 0;) grad = layers_[l]->backward(grad, l > 0);
    } else {
      cuda::check(cudaMemsetAsync(grads_.data(), 0, grads_.size() * sizeof(float), stream_),
                  "cudaMemsetAsync");
    }
    finish_step();
    host_current_ = false;
    return sums;
  }

  StepSums evaluate(const Tensor& x, const Tensor& y, std::int64_t sample_offset, const Loss& loss,
                    const Metrics& metrics) override {
    use_device(device_.index);
    const float* out = forward(x, y, sample_offset, false, &loss);
    const std::int64_t rows = x.dim(0);
    if (rows > 0)
      cuda::loss_rows(loss_spec(loss), out, y_.data(), rows, out_cols_, 1.0f, row_loss_.data(),
                      nullptr, stream_);
    const StepSums sums = reduce_sums(out, rows, metrics);
    finish_step();
    return sums;
  }

  void predict(const Tensor& x, std::int64_t sample_offset, float* out) override {
    use_device(device_.index);
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    if (rows == 0) return;
    const float* y = forward(x, Tensor(), sample_offset, false, nullptr);
    cuda::check(cudaMemcpyAsync(out, y, static_cast<std::size_t>(rows * out_cols_) * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_),
                "copy of the outputs to the host");
    finish_step();
  }

  float* gradients() override { return grads_.data(); }
  std::size_t gradient_count() const override { return static_cast<std::size_t>(trainable_); }

  void apply_update() override {
    use_device(device_.index);
    if (trainable_ == 0) return;
    // The host optimizer's counters are the truth (Optimizer::apply's order: count, then step).
    optimizer_.set_iterations(optimizer_.iterations() + 1);
    std::vector<float*> slots;
    for (auto& s : slots_) slots.push_back(s.data());
    cuda::optimizer_update(optimizer_spec_, values_.data(), grads_.data(), slots, trainable_,
                           segments_, optimizer_.iterations(), optimizer_.learning_rate(),
                           optimizer_scratch_.data(), stream_);
    finish_step();
    host_current_ = false;
  }

  void set_learning_rate(double lr) override { optimizer_.set_learning_rate(lr); }

  void pull() override {
    if (host_current_) return;
    use_device(device_.index);
    for (const auto& [p, offset] : offsets_)
      copy_to_host(p->value.data(), values_.data() + offset, p->value.size());
    auto trainable = model_.trainable_parameters();
    if (!slots_.empty()) {
      if (optimizer_.slotted_params() != trainable.size()) optimizer_.create_slots(trainable);
      for (std::size_t i = 0; i < trainable.size(); ++i) {
        const std::int64_t offset = offsets_.at(trainable[i]);
        for (std::size_t s = 0; s < slots_.size(); ++s)
          copy_to_host(optimizer_.slots(i)[s].data(), slots_[s].data() + offset,
                       trainable[i]->value.size());
      }
    }
    cuda::check(cudaStreamSynchronize(stream_), "copy of the weights to the host");
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      auto state = layers_[l]->random_state();
      if (!state.empty()) model_.layer(l).set_random_state(state);
    }
    host_current_ = true;
  }

  void push() override {
    use_device(device_.index);
    for (const auto& [p, offset] : offsets_)
      copy_to_device(values_.data() + offset, p->value.data(), p->value.size());
    auto trainable = model_.trainable_parameters();
    const bool slotted = optimizer_.slotted_params() == trainable.size() && !trainable.empty();
    for (auto& s : slots_)
      cuda::check(cudaMemsetAsync(s.data(), 0, s.size() * sizeof(float), stream_),
                  "cudaMemsetAsync");
    if (slotted)
      for (std::size_t i = 0; i < trainable.size(); ++i) {
        const std::int64_t offset = offsets_.at(trainable[i]);
        for (std::size_t s = 0; s < slots_.size(); ++s)
          copy_to_device(slots_[s].data() + offset, optimizer_.slots(i)[s].data(),
                         trainable[i]->value.size());
      }
    cuda::check(cudaStreamSynchronize(stream_), "copy of the weights to the device");
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      auto state = model_.layer(l).random_state();
      if (!state.empty()) layers_[l]->set_random_state(state);
    }
    host_current_ = true;
  }

 private:
  void build(Precision precision) {
    allocator_ = std::make_unique<cuda::DeviceAllocator>(device_.index);
    gemm_ = std::make_unique<cuda::DenseGemm>(*allocator_, stream_, device_precision(precision));
    ctx_.device = device_.index;
    ctx_.stream = stream_;
    ctx_.allocator = allocator_.get();
    ctx_.gemm = gemm_.get();
    ctx_.precision = device_precision(precision);
    optimizer_spec_ = cuda::device_optimizer(optimizer_);
    out_cols_ = shape_size(model_.output_shape());

    // The flat layout: trainable parameters first, then the others, each 256-byte aligned.
    auto trainable = model_.trainable_parameters();
    std::int64_t offset = 0;
    for (Parameter* p : trainable) {
      offsets_[p] = offset;
      segments_.push_back(offset);
      offset += aligned(p->value.size());
    }
    trainable_ = offset;
    segments_.push_back(trainable_);
    for (Parameter* p : model_.parameters())
      if (!offsets_.count(p)) {
        offsets_[p] = offset;
        offset += aligned(p->value.size());
      }
    values_ = cuda::DeviceBuffer(*allocator_, std::max<std::int64_t>(offset, 1));
    grads_ = cuda::DeviceBuffer(*allocator_, std::max<std::int64_t>(trainable_, 1));
    cuda::check(cudaMemsetAsync(values_.data(), 0, values_.size() * sizeof(float), stream_),
                "cudaMemsetAsync");
    cuda::check(cudaMemsetAsync(grads_.data(), 0, grads_.size() * sizeof(float), stream_),
                "cudaMemsetAsync");
    for (std::size_t s = 0; s < cuda::optimizer_slot_names(optimizer_spec_).size(); ++s)
      slots_.emplace_back(*allocator_, std::max<std::int64_t>(trainable_, 1));
    const std::int64_t scratch = cuda::optimizer_scratch_floats(trainable_, segments_);
    if (scratch > 0) optimizer_scratch_ = cuda::DeviceBuffer(*allocator_, scratch);
    results_ = cuda::DeviceBuffer(*allocator_, 2 * 64);  // doubles: loss, then metric pairs

    for (std::size_t l = 0; l < model_.layer_count(); ++l) {
      Layer& host = model_.layer(l);
      const Shape& in = l == 0 ? model_.input_shape() : model_.layer_output_shape(l - 1);
      layers_.push_back(cuda::make_device_layer(host, in, model_.layer_output_shape(l), ctx_));
      std::vector<cuda::DeviceParameter> bound;
      for (Parameter* p : host.parameters()) {
        const std::int64_t at = offsets_.at(p);
        const bool trains = at < trainable_;
        bound.push_back(
            {values_.data() + at, trains ? grads_.data() + at : nullptr, p->value.size()});
      }
      layers_.back()->bind(std::move(bound));
    }
    cuda::check(cudaStreamSynchronize(stream_), "the CUDA replica's set-up");
  }

  void release() {
    layers_.clear();
    slots_.clear();
    values_.reset(), grads_.reset(), optimizer_scratch_.reset(), results_.reset();
    x_.reset(), y_.reset(), row_loss_.reset(), row_metric_.reset(), row_count_.reset();
    loss_grad_.reset();
    gemm_.reset();
    allocator_.reset();
    if (stream_) {
      cudaSetDevice(device_.index);
      cudaStreamDestroy(stream_);
      stream_ = nullptr;
    }
  }

  const cuda::DeviceLoss& loss_spec(const Loss& loss) {
    if (loss_for_ != &loss) {
      loss_spec_ = cuda::device_loss(loss);
      loss_for_ = &loss;
    }
    return loss_spec_;
  }

  // The batch to the device and every layer's forward; returns the model's output. With a loss,
  // y is copied too (sparse labels checked on the host first, as the CPU loss does).
  const float* forward(const Tensor& x, const Tensor& y, std::int64_t sample_offset, bool training,
                       const Loss* loss) {
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    allocator_->set_context("a batch of " + std::to_string(rows) + " samples on this replica");
    if (loss && rows > 0 && loss_spec(*loss).kind == cuda::DeviceLoss::Kind::scce)
      cuda::check_sparse_labels(y.data(), rows, out_cols_);
    x_.resize(*allocator_, std::max<std::int64_t>(x.size(), 1));
    copy_to_device(x_.data(), x.data(), x.size());
    if (loss) {
      y_.resize(*allocator_, std::max<std::int64_t>(y.size(), 1));
      copy_to_device(y_.data(), y.data(), y.size());
      row_loss_.resize(*allocator_, std::max<std::int64_t>(rows, 1));
    }
    const float* h = x_.data();
    if (rows == 0) return h;
    for (auto& layer : layers_) h = layer->forward(h, rows, training, sample_offset);
    return h;
  }

  // Loss and metric sums of the last forward, in double on the device, then one copy back.
  StepSums reduce_sums(const float* out, std::int64_t rows, const Metrics& metrics) {
    StepSums sums;
    sums.metrics.resize(metrics.size());
    if (rows == 0) return sums;
    const std::size_t needed = 1 + 2 * metrics.size();
    if (static_cast<std::int64_t>(needed * 2) > results_.size())
      results_.resize(*allocator_, static_cast<std::int64_t>(needed * 2));
    auto* results = reinterpret_cast<double*>(results_.data());
    cuda::sum(row_loss_.data(), rows, results, stream_);
    row_metric_.resize(*allocator_, rows);
    row_count_.resize(*allocator_, rows);
    for (std::size_t m = 0; m < metrics.size(); ++m) {
      if (metric_specs_.size() <= m || metric_for_[m] != metrics[m].get()) {
        metric_specs_.resize(metrics.size());
        metric_for_.resize(metrics.size());
        metric_specs_[m] = cuda::device_metric(*metrics[m]);
        metric_for_[m] = metrics[m].get();
      }
      cuda::metric_rows(metric_specs_[m], out, y_.data(), rows, out_cols_, row_metric_.data(),
                        row_count_.data(), stream_);
      cuda::sum(row_metric_.data(), rows, results + 1 + 2 * m, stream_);
      cuda::sum(row_count_.data(), rows, results + 2 + 2 * m, stream_);
    }
    host_results_.resize(needed);
    cuda::check(cudaMemcpyAsync(host_results_.data(), results, needed * sizeof(double),
                                cudaMemcpyDeviceToHost, stream_),
                "copy of the loss to the host");
    cuda::check(cudaStreamSynchronize(stream_), "the training step");
    sums.loss = {host_results_[0], static_cast<double>(rows)};
    for (std::size_t m = 0; m < metrics.size(); ++m)
      sums.metrics[m] = {host_results_[1 + 2 * m], host_results_[2 + 2 * m]};
    return sums;
  }

  void finish_step() { cuda::check(cudaStreamSynchronize(stream_), "the training step"); }

  void copy_to_device(float* dst, const float* src, std::int64_t n) {
    if (n > 0)
      cuda::check(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float),
                                  cudaMemcpyHostToDevice, stream_),
                  "copy to the device");
  }

  void copy_to_host(float* dst, const float* src, std::int64_t n) {
    if (n > 0)
      cuda::check(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_),
                  "copy to the host");
  }

  Model& model_;
  Optimizer& optimizer_;
  DeviceSpec device_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<cuda::DeviceAllocator> allocator_;
  std::unique_ptr<cuda::DenseGemm> gemm_;
  cuda::DeviceContext ctx_;
  std::vector<std::unique_ptr<cuda::DeviceLayer>> layers_;
  std::map<Parameter*, std::int64_t> offsets_;  // each parameter's place in values_
  std::vector<std::int64_t> segments_;          // trainable tensors' offsets, then trainable_
  std::int64_t trainable_ = 0;  // floats of the trainable part (with alignment gaps)
  std::int64_t out_cols_ = 0;
  cuda::DeviceBuffer values_, grads_, optimizer_scratch_, results_;
  std::vector<cuda::DeviceBuffer> slots_;
  cuda::DeviceBuffer x_, y_, row_loss_, row_metric_, row_count_, loss_grad_;
  cuda::DeviceOptimizer optimizer_spec_;
  cuda::DeviceLoss loss_spec_;
  const Loss* loss_for_ = nullptr;
  std::vector<cuda::DeviceMetric> metric_specs_;
  std::vector<const Metric*> metric_for_;
  std::vector<double> host_results_;
  bool host_current_ = false;
};

}  // namespace

std::unique_ptr<Replica> make_cuda_replica(Model& model, Optimizer& optimizer, DeviceSpec device,
                                           Precision precision) {
  return std::make_unique<CudaReplica>(model, optimizer, device, precision);
}

}  // namespace tandem::detail
