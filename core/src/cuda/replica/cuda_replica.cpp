// The CUDA replica (parallel/replica.hpp): a copy of the host model resident on one GPU — the
// model's own layers (a clone of the host model) computing on the replica's CUDA backend
// (cuda/backend/cuda_backend.hpp), so every layer, loss, metric and optimizer is the one class the
// CPU runs.
//
// A step: the batch to the device (batch_staging.hpp), the model's forward, the loss and metric
// sums in double on the device, the model's backward with the gradients summed across GPUs in
// buckets as it goes (bucketed_reduction.hpp), all of it replayed from a CUDA graph when the step
// was seen before (step_graphs.hpp); one copy of the sums back and one synchronization. The
// parameters, gradients and optimizer slots are flat device tensors (device_parameters.hpp), so
// the optimizer update is one fused launch.
//
// The host model and optimizer are a mirror: after a step they are stale, and pull() copies the
// device state back (weights, non-trainable statistics, optimizer slots, Dropout call counts)
// only then; the learning rate and iteration count are host numbers kept current at every step.
//
// Ownership: owns its stream, allocator, backend, device model and the units above (RAII,
// destroyed in reverse order of declaration, after the streams drained); borrows the host model,
// optimizer and communicator. Thread-safety: one thread at a time (its worker thread during a
// step).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>

#include "cuda/backend/cuda_backend.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/cuda_handles.hpp"
#include "cuda/ops/dense_gemm.hpp"
#include "cuda/ops/device_allocator.hpp"
#include "cuda/replica/batch_staging.hpp"
#include "cuda/replica/bucketed_reduction.hpp"
#include "cuda/replica/device_parameters.hpp"
#include "cuda/replica/host_copies.hpp"
#include "cuda/replica/replica_device.hpp"
#include "cuda/replica/step_graphs.hpp"
#include "nn/constraint.hpp"
#include "nn/dtype_policy.hpp"
#include "nn/layer_extensions.hpp"
#include "nn/regularizer.hpp"
#include "parallel/cuda_module_api.hpp"
#include "tandem/error.hpp"

namespace tandem::detail {

namespace {

using cuda::device_precision;
using cuda::use_device;

std::vector<const Metric*> metric_keys(const Objective& objective) {
  std::vector<const Metric*> keys;
  for (std::size_t j = 0; j < objective.output_count(); ++j)
    for (const Metric* m : objective.output(j).metrics) keys.push_back(m);
  return keys;
}

class CudaReplica : public Replica {
 public:
  CudaReplica(Model& model, Optimizer& optimizer, DeviceSpec device, Precision precision,
              StreamCommunicator* communicator, int participant)
      : model_(model),
        optimizer_(optimizer),
        device_(device),
        stream_(device.index),
        allocator_(std::make_shared<cuda::DeviceAllocator>(device.index)),
        gemm_(*allocator_, stream(), device_precision(precision)),
        backend_(allocator_, stream(), gemm_, device_precision(precision)),
        layer_precisions_(nn::layer_precisions(model, precision)),
        float_gemm_(
            cuda::keeps_float_layers(layer_precisions_, precision)
                ? std::make_unique<cuda::DenseGemm>(*allocator_, stream(), cuda::Precision::fp32)
                : nullptr),
        float_backend_(float_gemm_ ? backend_.sibling(*float_gemm_, cuda::Precision::fp32)
                                   : nullptr),
        device_model_(device_model_on(precision)),
        parameters_(*device_model_, optimizer_.slot_names().size(), backend_),
        reduction_(communicator, participant, device.index, *device_model_, parameters_.layout(),
                   parameters_.gradients()),
        staging_(backend_, device.index),
        graphs_(backend_, *allocator_, stream(), device.index),
        sums_(backend_.sums()),
        penalty_sums_(backend_.sums()),
        activity_sums_(backend_.sums()) {
    push();
  }

  ~CudaReplica() override {
    cudaSetDevice(device_.index);
    cudaStreamSynchronize(stream());  // no graph or buffer may go while the step still runs
  }

  DeviceSpec device() const override { return device_; }
  Model& model() override { return model_; }
  Optimizer& optimizer() override { return optimizer_; }

  StepSums train(const Tensor& x, const Tensor& y, std::int64_t sample_offset, float loss_scale,
                 const Objective& objective, const NextRows* next) override {
    use_device(device_.index);
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    place_batch(x, y, &objective);
    host_current_ = false;
    if (rows == 0) {
      // No rows here: zero gradients, still summed with the other replicas' (every participant
      // queues the same reductions), Dropout's training calls counted, and the averages of
      // BatchNormalization's moving statistics over the replicas met.
      backend_.fill(parameters_.gradients(), 0.0f);
      backend_.count_dropout_calls();
      nn::forward_without_rows(*device_model_);
      objective.count_without_rows(*device_model_);
      for (std::size_t l = device_model_->layer_count(); l-- > 0;)
        reduction_.after_backward_of(l, stream());
      reduction_.join(stream());
      staging_.stage_next(x, y, next, stream());
      finish_step();
      return objective.zero();
    }
    const cuda::StepKey key{rows,
                            sample_offset,
                            loss_scale,
                            &objective.loss(),
                            metric_keys(objective),
                            staging_.x().data(),
                            staging_.y().data()};
    device_model_->set_penalty_batch_size(
        model_.penalty_batch_size());  // host state, before capture
    graphs_.run(
        key,
        [&] {
          const auto& outputs = device_model_->forward_outputs(staging_.x(), true, sample_offset);
          device_model_->enqueue_activity_penalties(*activity_sums_, loss_scale);
          objective.enqueue(backend_, *device_model_, outputs, staging_.y(), loss_scale, true,
                            scratch_, *sums_);
          device_model_->backward_outputs(scratch_.grad_views, [&](std::size_t l) {
            reduction_.after_backward_of(l, stream());
          });
          reduction_.join(stream());
        },
        [&] { reduction_.abandon(); });
    staging_.stage_next(x, y, next, stream());          // while the step computes
    return with_penalty(objective.read(*sums_, rows));  // the step's one synchronization
  }

  StepSums evaluate(const Tensor& x, const Tensor& y, std::int64_t sample_offset,
                    const Objective& objective) override {
    use_device(device_.index);
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    place_batch(x, y, &objective);
    if (rows == 0) {
      objective.count_without_rows(*device_model_);
      return objective.zero();
    }
    const auto& outputs = device_model_->forward_outputs(staging_.x(), false, sample_offset);
    device_model_->set_penalty_batch_size(model_.penalty_batch_size());
    device_model_->enqueue_activity_penalties(*activity_sums_, 0.0f);
    objective.enqueue(backend_, *device_model_, outputs, staging_.y(), 1.0f, false, scratch_,
                      *sums_);
    return with_penalty(objective.read(*sums_, rows));
  }

  void predict(const Tensor& x, std::int64_t sample_offset, float* out) override {
    use_device(device_.index);
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    if (rows == 0) return;
    place_batch(x, Tensor(), nullptr);
    const Tensor& y = device_model_->forward(staging_.x(), false, sample_offset);
    cuda::copy_to_host(out, y.data(), y.size(), stream());
    finish_step();
  }

  /// The host mirror (the meta-model sets its penalty batch size, which a step reads) and the
  /// device model, whose BatchNormalization layers average their moving statistics over the
  /// replicas in the forward (docs/meta-model.md).
  std::vector<Model*> training_models() override { return {&model_, device_model_.get()}; }

  Tensor& gradients() override { return parameters_.gradients(); }
  bool sums_gradients() const override { return reduction_.active(); }

  void apply_update() override {
    use_device(device_.index);
    if (parameters_.layout().trainable_floats == 0) return;
    // A loss-scaled step: unscaled on the device first (penalty gradients are not scaled), and
    // skipped when they are not finite; the loss scale is the host optimizer's.
    if (!optimizer_.unscale_gradients(gradients(), backend_)) return;
    // The host optimizer's counters are the truth (Optimizer::apply's order: count, then step).
    optimizer_.set_iterations(optimizer_.iterations() + 1);
    nn::add_penalty_gradients(*device_model_);  // Keras' kernel_regularizer and kin
    backend_.optimizer_update(optimizer_.desc(), optimizer_.iterations(),
                              optimizer_.step_learning_rate(), parameters_.update_tensors());
    nn::apply_constraints(*device_model_);  // on the device, behind the step
    // Left in flight: the next step's work queues behind it on this stream, and pull() and the
    // next step's sums synchronize.
    cuda::check(cudaGetLastError(), "the optimizer update");
    host_current_ = false;
  }

  void set_learning_rate(double lr) override { optimizer_.set_learning_rate(lr); }

  void pull() override {
    if (host_current_) return;
    use_device(device_.index);
    parameters_.pull(model_, optimizer_, stream());
    cuda::check(cudaStreamSynchronize(stream()), "copy of the weights to the host");
    const auto calls = backend_.dropout_calls();
    for (std::size_t l = 0; l < model_.layer_count(); ++l) {
      auto state = device_model_->layer(l).random_state();
      if (state.size() == 2)
        if (auto it = calls.find(state[0]); it != calls.end()) state[1] = it->second;
      if (!state.empty()) {
        model_.layer(l).set_random_state(state);
        device_model_->layer(l).set_random_state(state);
      }
    }
    host_current_ = true;
  }

  void push() override {
    use_device(device_.index);
    parameters_.push(model_, optimizer_, stream());
    cuda::check(cudaStreamSynchronize(stream()), "copy of the weights to the device");
    for (std::size_t l = 0; l < model_.layer_count(); ++l) {
      const auto state = model_.layer(l).random_state();
      if (state.empty()) continue;
      device_model_->layer(l).set_random_state(state);
      if (state.size() == 2) backend_.set_dropout_calls(state[0], state[1]);
    }
    host_current_ = true;
  }

 private:
  cudaStream_t stream() const { return stream_.get(); }

  // The loss with the weights' penalties (as the CPU replica: per row); a second read of sums
  // only for a model with regularizers.
  StepSums with_penalty(StepSums sums) {
    sums.loss.sum += nn::weight_penalty(*device_model_, *penalty_sums_) * sums.loss.count;
    if (device_model_->has_activity_regularizers())
      for (double p : activity_sums_->read()) sums.loss.sum += p;  // sums over these rows
    return sums;
  }

  // The device model: a clone of the host model whose layers compute on backend_ (in the run's
  // precision) or float_backend_ (the layers kept at float32); its parameters become views into
  // the flat tensors (DeviceParameters).
  std::unique_ptr<Model> device_model_on(Precision run) {
    auto device_model = model_.clone();
    for (std::size_t l = 0; l < model_.layer_count(); ++l) {
      device_model->layer(l).set_trainable(model_.layer(l).trainable());
      device_model->layer(l).set_backend(layer_precisions_[l] == run ? backend_ : *float_backend_);
    }
    return device_model;
  }

  // The batch to the device (and with an objective, its targets: sparse labels checked on the
  // host first, as the CPU loss does).
  void place_batch(const Tensor& x, const Tensor& y, const Objective* objective) {
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    allocator_->set_context("a batch of " + std::to_string(rows) + " samples on this replica");
    if (objective && rows > 0) objective->check_labels(y, model_);
    staging_.place(x, y, objective != nullptr, stream());
  }

  void finish_step() { cuda::check(cudaStreamSynchronize(stream()), "the training step"); }

  Model& model_;
  Optimizer& optimizer_;
  DeviceSpec device_;
  cuda::CudaStream stream_;  // the step's work
  std::shared_ptr<cuda::DeviceAllocator> allocator_;
  cuda::DenseGemm gemm_;
  cuda::CudaBackend backend_;
  std::vector<Precision> layer_precisions_;      // per layer of the model (nn/dtype_policy.hpp)
  std::unique_ptr<cuda::DenseGemm> float_gemm_;  // for float_backend_: null without it
  std::unique_ptr<cuda::CudaBackend> float_backend_;  // the float32 layers of a mixed model
  std::unique_ptr<Model> device_model_;  // the host model's clone, on backend_ (and float_backend_)
  cuda::DeviceParameters parameters_;    // device_model_'s parameters and the optimizer's slots
  cuda::BucketedReduction reduction_;
  cuda::BatchStaging staging_;
  cuda::StepGraphs graphs_;
  std::unique_ptr<backend::Sums> sums_;
  std::unique_ptr<backend::Sums> penalty_sums_;   // the weights' penalties (regularizers)
  std::unique_ptr<backend::Sums> activity_sums_;  // the outputs' penalties (activity_regularizer)
  ObjectiveScratch scratch_;  // the loss gradients and targets apart (the graphs point into it)
  bool host_current_ = false;
};

}  // namespace

std::unique_ptr<Replica> make_cuda_replica(Model& model, Optimizer& optimizer, DeviceSpec device,
                                           Precision precision, StreamCommunicator* communicator,
                                           int participant) {
  return std::make_unique<CudaReplica>(model, optimizer, device, precision, communicator,
                                       participant);
}

}  // namespace tandem::detail
