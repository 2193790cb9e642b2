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
//
// Batches: two device input slots. The step in flight reads one; the next batch, when the caller
// names it (NextRows), is copied into the other on a copy stream while the step computes, and
// the next step starts from it without a copy of its own. A step whose rows are those the caller
// promised unchanged (NextRows naming the current rows) reuses the device copy.
//
// Gradients across GPUs: with a communicator of more than one participant (NCCL), the backward
// pass sums the gradients itself, in buckets of whole layers from the last layer back: when a
// bucket's layers have run their backward, its all-reduce is queued on a reduce stream behind an
// event, overlapping the backward of the layers before it; the step ends when every bucket is
// summed (Replica::sums_gradients).
#include <cuda_runtime_api.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

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
#include "cuda/replica/gradient_buckets.hpp"
#include "cuda/stream_reducer.hpp"
#include "tandem/error.hpp"

namespace tandem::detail {

namespace {

constexpr std::int64_t kAlign = 64;  // floats: 256 bytes
// Gradient buckets: the first (the last layers, whose gradients exist first) small, so its
// all-reduce starts early; the others large enough that NCCL runs at full bandwidth.
constexpr std::int64_t kFirstBucketFloats = std::int64_t{1} << 18;  // 1 MiB
constexpr std::int64_t kBucketFloats = std::int64_t{1} << 22;       // 16 MiB
constexpr std::size_t kMaxGraphs = 8;  // captured steps kept (shapes x input slots)

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
  CudaReplica(Model& model, Optimizer& optimizer, DeviceSpec device, Precision precision,
              Communicator& communicator, int participant)
      : model_(model), optimizer_(optimizer), device_(device), participant_(participant) {
    use_device(device_.index);
    try {
      cuda::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
      cuda::check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking),
                  "cudaStreamCreate");
      cuda::check(cudaEventCreateWithFlags(&staged_ready_, cudaEventDisableTiming),
                  "cudaEventCreate");
      if (communicator.size() > 1 || communicator.spans_world()) {
        reducer_ = dynamic_cast<cuda::StreamReducer*>(&communicator);
        if (!reducer_)
          throw ConfigError("devices", "CUDA replicas need the \"nccl\" communicator, not \"" +
                                           communicator.name() + "\"");
        cuda::check(cudaStreamCreateWithFlags(&reduce_stream_, cudaStreamNonBlocking),
                    "cudaStreamCreate");
        cuda::check(cudaEventCreateWithFlags(&grads_ready_, cudaEventDisableTiming),
                    "cudaEventCreate");
        cuda::check(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming), "cudaEventCreate");
      }
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
                 const Loss& loss, const Metrics& metrics, const NextRows* next) override {
    use_device(device_.index);
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    place_batch(x, y, &loss);
    host_current_ = false;
    if (rows == 0) {
      // No rows here: zero gradients, still summed with the other replicas' (every participant
      // queues the same reductions), and the layers' training calls counted.
      cuda::check(cudaMemsetAsync(grads_.data(), 0, grads_.size() * sizeof(float), stream_),
                  "cudaMemsetAsync");
      for (auto& layer : layers_) layer->skip_training_step();
      for (std::size_t l = layers_.size(); l-- > 0;) reduce_bucket_of(l);
      join_reductions();
      stage_next(x, y, next);
      finish_step();
      StepSums sums;
      sums.metrics.resize(metrics.size());
      return sums;
    }
    prepare_sums(rows, metrics);
    loss_grad_.resize(*allocator_, rows * out_cols_);
    const StepKey key{rows,        sample_offset,    loss_scale,      &loss,
                      metric_for_, input().x.data(), input().y.data()};
    const auto enqueue = [&] {
      const float* out = forward_layers(rows, sample_offset, true);
      cuda::loss_rows(loss_spec(loss), out, input().y.data(), rows, out_cols_, loss_scale,
                      row_loss_.data(), loss_grad_.data(), stream_);
      enqueue_sums(out, rows, metrics.size());
      const float* grad = loss_grad_.data();
      for (std::size_t l = layers_.size(); l-- > 0;) {
        grad = layers_[l]->backward(grad, l > 0);
        reduce_bucket_of(l);
      }
      join_reductions();
    };
    run_step(key, enqueue);
    stage_next(x, y, next);  // while the step computes
    return read_sums(rows, metrics.size());
  }

  StepSums evaluate(const Tensor& x, const Tensor& y, std::int64_t sample_offset, const Loss& loss,
                    const Metrics& metrics) override {
    use_device(device_.index);
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    place_batch(x, y, &loss);
    if (rows == 0) {
      StepSums sums;
      sums.metrics.resize(metrics.size());
      return sums;
    }
    prepare_sums(rows, metrics);
    const float* out = forward_layers(rows, sample_offset, false);
    cuda::loss_rows(loss_spec(loss), out, input().y.data(), rows, out_cols_, 1.0f, row_loss_.data(),
                    nullptr, stream_);
    enqueue_sums(out, rows, metrics.size());
    return read_sums(rows, metrics.size());
  }

  void predict(const Tensor& x, std::int64_t sample_offset, float* out) override {
    use_device(device_.index);
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    if (rows == 0) return;
    place_batch(x, Tensor(), nullptr);
    const float* y = forward_layers(rows, sample_offset, false);
    cuda::check(cudaMemcpyAsync(out, y, static_cast<std::size_t>(rows * out_cols_) * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_),
                "copy of the outputs to the host");
    finish_step();
  }

  float* gradients() override { return grads_.data(); }
  std::size_t gradient_count() const override { return static_cast<std::size_t>(trainable_); }
  bool sums_gradients() const override { return reducer_ != nullptr; }

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
    // Left in flight: the next step's work queues behind it on this stream, and pull() and the
    // next step's sums synchronize.
    check_launched();
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
    plan_buckets();
    cuda::check(cudaStreamSynchronize(stream_), "the CUDA replica's set-up");
    const char* env = std::getenv("TANDEM_CUDA_GRAPHS");
    if (env && std::string(env) == "0") graphs_ = Graphs::off;
    for (const auto& layer : layers_)
      if (!layer->capturable()) graphs_ = Graphs::off;
  }

  // Buckets of whole layers' trainable gradients (gradient_buckets.hpp): a layer's trainable
  // parameters are contiguous in the flat layout, with their alignment gaps up to the next
  // layer's. bucket_of_layer_[l] is the range whose all-reduce starts once layer l's backward has
  // run, or empty.
  void plan_buckets() {
    bucket_of_layer_.assign(layers_.size(), {0, 0});
    if (!reducer_ || trainable_ == 0) return;
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges(layers_.size(), {0, 0});
    std::int64_t next_begin = trainable_;
    for (std::size_t l = layers_.size(); l-- > 0;) {
      std::int64_t begin = next_begin;
      for (Parameter* p : model_.layer(l).parameters())
        if (const std::int64_t at = offsets_.at(p); at < trainable_) begin = std::min(begin, at);
      ranges[l] = {begin, begin == next_begin ? begin : next_begin};
      next_begin = begin;
    }
    for (const auto& b :
         cuda::plan_gradient_buckets(ranges, trainable_, kFirstBucketFloats, kBucketFloats))
      bucket_of_layer_[b.after_layer] = {b.begin, b.end};
  }

  // Queues the all-reduce of the bucket that ends with layer l's gradients, behind them.
  void reduce_bucket_of(std::size_t l) {
    if (!reducer_) return;
    const auto [begin, end] = bucket_of_layer_[l];
    if (begin == end) return;
    cuda::check(cudaEventRecord(grads_ready_, stream_), "cudaEventRecord");
    cuda::check(cudaStreamWaitEvent(reduce_stream_, grads_ready_, 0), "cudaStreamWaitEvent");
    reducer_->all_reduce_on_stream(participant_, grads_.data() + begin,
                                   static_cast<std::size_t>(end - begin), reduce_stream_);
    reductions_queued_ = true;
  }

  // The step's stream waits for every reduction queued since the last join (and, in a capture,
  // joins them into it).
  void join_reductions() {
    if (!reductions_queued_) return;
    reductions_queued_ = false;
    cuda::check(cudaEventRecord(reduced_, reduce_stream_), "cudaEventRecord");
    cuda::check(cudaStreamWaitEvent(stream_, reduced_, 0), "cudaStreamWaitEvent");
  }

  void release() {
    clear_graphs();
    layers_.clear();
    slots_.clear();
    values_.reset(), grads_.reset(), optimizer_scratch_.reset(), results_.reset();
    if (copy_stream_) {
      cudaSetDevice(device_.index);
      cudaStreamSynchronize(copy_stream_);  // no copy may still write into a slot
    }
    for (auto& slot : inputs_) slot = InputSlot{};
    row_loss_.reset(), row_metric_.reset(), row_count_.reset();
    loss_grad_.reset();
    gemm_.reset();
    allocator_.reset();
    cudaSetDevice(device_.index);
    for (cudaEvent_t* e : {&staged_ready_, &grads_ready_, &reduced_})
      if (*e) cudaEventDestroy(*e), *e = nullptr;
    for (cudaStream_t* st : {&stream_, &copy_stream_, &reduce_stream_})
      if (*st) cudaStreamDestroy(*st), *st = nullptr;
  }

  const cuda::DeviceLoss& loss_spec(const Loss& loss) {
    if (loss_for_ != &loss) {
      loss_spec_ = cuda::device_loss(loss);
      loss_for_ = &loss;
    }
    return loss_spec_;
  }

  // A device copy of a batch's rows: x, and y when the step has a loss.
  struct InputSlot {
    cuda::DeviceBuffer x, y;
    Tensor host_x, host_y;  // the host rows it holds (kept alive while held), when reusable
    bool reusable = false;  // the caller promised host_x/host_y unchanged (NextRows)
  };

  InputSlot& input() { return inputs_[current_]; }

  static bool same_rows(const Tensor& a, const Tensor& b) {
    return a.data() == b.data() && a.shape() == b.shape();
  }

  // The batch to the device (and with a loss, its targets: sparse labels checked on the host
  // first, as the CPU loss does) into input(): taken from the other slot when it was staged
  // there, kept when input() holds it and it was promised unchanged, copied otherwise. A slot's
  // buffers keep their place while the batch size does not grow, which a captured step relies on.
  void place_batch(const Tensor& x, const Tensor& y, const Loss* loss) {
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    allocator_->set_context("a batch of " + std::to_string(rows) + " samples on this replica");
    if (loss && rows > 0 && loss_spec(*loss).kind == cuda::DeviceLoss::Kind::scce)
      cuda::check_sparse_labels(y.data(), rows, out_cols_);
    const bool with_y = loss != nullptr;
    const auto holds = [&](const InputSlot& slot) {
      return slot.reusable && same_rows(slot.host_x, x) && (!with_y || same_rows(slot.host_y, y));
    };
    InputSlot& other = inputs_[1 - current_];
    if (staged_ && holds(other)) {
      cuda::check(cudaStreamWaitEvent(stream_, staged_ready_, 0), "cudaStreamWaitEvent");
      current_ = 1 - current_;
      staged_ = false;
    } else if (!holds(input())) {
      InputSlot& slot = input();
      slot.x.resize(*allocator_, std::max<std::int64_t>(x.size(), 1));
      copy_to_device(slot.x.data(), x.data(), x.size(), stream_);
      if (with_y) {
        slot.y.resize(*allocator_, std::max<std::int64_t>(y.size(), 1));
        copy_to_device(slot.y.data(), y.data(), y.size(), stream_);
      }
    }
    // Used now: the promise was until this step.
    input().reusable = false;
    input().host_x = Tensor(), input().host_y = Tensor();
    if (loss) row_loss_.resize(*allocator_, std::max<std::int64_t>(rows, 1));
  }

  // After the step is queued: `next`'s rows to the device. The rows of this step (x, y) again:
  // input() keeps them. Others: copied into the other slot on the copy stream, overlapping the
  // step (that slot's last reader, the step before, has finished: read_sums waited for it).
  void stage_next(const Tensor& x, const Tensor& y, const NextRows* next) {
    if (!next) return;
    if (same_rows(next->x, x) && same_rows(next->y, y)) {
      input().host_x = x, input().host_y = y;
      input().reusable = true;
      return;
    }
    if (next->x.size() == 0) return;
    InputSlot& slot = inputs_[1 - current_];
    const bool grows = slot.x.size() < next->x.size() || slot.y.size() < next->y.size();
    if (grows) {
      // The allocator orders reuse by the step's stream alone: a block that goes back to it
      // must not be written by a copy any more, and a block it hands out here must not be in
      // use by the step just queued (one that a layer released mid-step). Only when a slot
      // grows: the first steps of a batch size.
      cuda::check(cudaStreamSynchronize(copy_stream_), "a staged copy");
      cuda::check(cudaStreamSynchronize(stream_), "the training step");
    }
    slot.x.resize(*allocator_, next->x.size());
    slot.y.resize(*allocator_, std::max<std::int64_t>(next->y.size(), 1));
    copy_to_device(slot.x.data(), next->x.data(), next->x.size(), copy_stream_);
    copy_to_device(slot.y.data(), next->y.data(), next->y.size(), copy_stream_);
    cuda::check(cudaEventRecord(staged_ready_, copy_stream_), "cudaEventRecord");
    slot.host_x = next->x, slot.host_y = next->y;
    slot.reusable = true;
    staged_ = true;
  }

  const float* forward_layers(std::int64_t rows, std::int64_t sample_offset, bool training) {
    const float* h = input().x.data();
    for (auto& layer : layers_) h = layer->forward(h, rows, training, sample_offset);
    return h;
  }

  // Sizes the sum buffers and resolves the metrics (before a capture: nothing may allocate in it).
  void prepare_sums(std::int64_t rows, const Metrics& metrics) {
    const auto needed = static_cast<std::int64_t>(2 * (1 + 2 * metrics.size()));
    if (needed > results_.size()) results_.resize(*allocator_, needed);
    row_metric_.resize(*allocator_, rows);
    row_count_.resize(*allocator_, rows);
    metric_specs_.resize(metrics.size());
    metric_for_.resize(metrics.size());
    for (std::size_t m = 0; m < metrics.size(); ++m)
      if (metric_for_[m] != metrics[m].get()) {
        metric_specs_[m] = cuda::device_metric(*metrics[m]);
        metric_for_[m] = metrics[m].get();
      }
  }

  // The loss and metric sums of the last forward, in double on the device (queued only).
  void enqueue_sums(const float* out, std::int64_t rows, std::size_t metric_count) {
    auto* results = reinterpret_cast<double*>(results_.data());
    cuda::sum(row_loss_.data(), rows, results, stream_);
    for (std::size_t m = 0; m < metric_count; ++m) {
      cuda::metric_rows(metric_specs_[m], out, input().y.data(), rows, out_cols_,
                        row_metric_.data(), row_count_.data(), stream_);
      cuda::sum(row_metric_.data(), rows, results + 1 + 2 * m, stream_);
      cuda::sum(row_count_.data(), rows, results + 2 + 2 * m, stream_);
    }
  }

  // One copy of the sums back, and the step's one synchronization.
  StepSums read_sums(std::int64_t rows, std::size_t metric_count) {
    const std::size_t needed = 1 + 2 * metric_count;
    host_results_.resize(needed);
    cuda::check(cudaMemcpyAsync(host_results_.data(), results_.data(), needed * sizeof(double),
                                cudaMemcpyDeviceToHost, stream_),
                "copy of the loss to the host");
    cuda::check(cudaStreamSynchronize(stream_), "the training step");
    StepSums sums;
    sums.loss = {host_results_[0], static_cast<double>(rows)};
    sums.metrics.resize(metric_count);
    for (std::size_t m = 0; m < metric_count; ++m)
      sums.metrics[m] = {host_results_[1 + 2 * m], host_results_[2 + 2 * m]};
    return sums;
  }

  // What a captured training step depends on besides the buffers' contents.
  struct StepKey {
    std::int64_t rows;
    std::int64_t sample_offset;
    float loss_scale;
    const Loss* loss;
    std::vector<const Metric*> metrics;
    const float* x;  // the input slot's buffers
    const float* y;
    bool operator<(const StepKey& o) const {
      return std::tie(rows, sample_offset, loss_scale, loss, metrics, x, y) <
             std::tie(o.rows, o.sample_offset, o.loss_scale, o.loss, o.metrics, o.x, o.y);
    }
  };

  // Runs a training step's device work: replayed from a CUDA graph when this step was seen
  // before (launch-bound models run one launch instead of dozens), captured the second time a
  // step of this shape comes (the first sized every buffer), queued directly otherwise. A
  // capture that fails turns graphs off for this replica, with a warning, and the step runs
  // directly: graphs are a speed-up, never a reason for a run to fail.
  template <class Enqueue>
  void run_step(const StepKey& key, const Enqueue& enqueue) {
    if (graphs_ == Graphs::off) {
      enqueue();
      return;
    }
    // A graph holds the addresses of the buffers it was captured with: any buffer that moved
    // since (one grew, e.g. for a larger validation batch) makes every graph stale.
    if (allocator_->stats().allocations != allocations_at_capture_) clear_graphs();
    if (auto it = graphs_by_step_.find(key); it != graphs_by_step_.end()) {
      cuda::check(cudaGraphLaunch(it->second, stream_), "cudaGraphLaunch (the training step)");
      return;
    }
    if (!seen_steps_.count(key)) {
      seen_steps_.insert(key);
      enqueue();
      return;
    }
    if (graphs_by_step_.size() >= kMaxGraphs) clear_graphs();  // e.g. a changing last batch
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    std::string failure;
    cuda::check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                "cudaStreamBeginCapture");
    try {
      enqueue();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    if (failure.empty() && ended != cudaSuccess) failure = cudaGetErrorString(ended);
    if (failure.empty()) {
      const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
      if (made != cudaSuccess) failure = cudaGetErrorString(made);
    }
    if (graph) cudaGraphDestroy(graph);
    if (!failure.empty()) {
      cudaGetLastError();  // the capture's error is not the step's
      reductions_queued_ = false;
      if (exec) cudaGraphExecDestroy(exec);
      graphs_ = Graphs::off;
      spdlog::warn(
          "cuda:{}: the training step could not be captured in a CUDA graph ({}); it runs "
          "without one (slower for small batches)",
          device_.index, failure);
      enqueue();
      return;
    }
    graphs_by_step_.emplace(key, exec);
    allocations_at_capture_ = allocator_->stats().allocations;
    cuda::check(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch (the training step)");
  }

  void clear_graphs() {
    for (auto& [key, exec] : graphs_by_step_) cudaGraphExecDestroy(exec);
    graphs_by_step_.clear();
    seen_steps_.clear();
    if (allocator_) allocations_at_capture_ = allocator_->stats().allocations;
  }

  // Surfaces a launch error of the update now, without waiting for it.
  void check_launched() { cuda::check(cudaGetLastError(), "the optimizer update"); }

  void finish_step() { cuda::check(cudaStreamSynchronize(stream_), "the training step"); }

  void copy_to_device(float* dst, const float* src, std::int64_t n, cudaStream_t stream) {
    if (n > 0)
      cuda::check(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float),
                                  cudaMemcpyHostToDevice, stream),
                  "copy to the device");
  }
  void copy_to_device(float* dst, const float* src, std::int64_t n) {
    copy_to_device(dst, src, n, stream_);
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
  int participant_;                         // in the communicator
  cudaStream_t stream_ = nullptr;           // the step's work
  cudaStream_t copy_stream_ = nullptr;      // staged batches
  cudaEvent_t staged_ready_ = nullptr;      // the last staged copy is done
  cuda::StreamReducer* reducer_ = nullptr;  // the NCCL communicator; null: nothing to sum
  cudaStream_t reduce_stream_ = nullptr;
  cudaEvent_t grads_ready_ = nullptr, reduced_ = nullptr;
  bool reductions_queued_ = false;  // since the last join_reductions()
  std::vector<std::pair<std::int64_t, std::int64_t>> bucket_of_layer_;  // [begin, end) per layer
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
  InputSlot inputs_[2];
  int current_ = 0;      // the slot of the last step
  bool staged_ = false;  // the other slot holds staged rows (staged_ready_ marks the copy)
  cuda::DeviceBuffer row_loss_, row_metric_, row_count_, loss_grad_;
  cuda::DeviceOptimizer optimizer_spec_;
  cuda::DeviceLoss loss_spec_;
  const Loss* loss_for_ = nullptr;
  std::vector<cuda::DeviceMetric> metric_specs_;
  std::vector<const Metric*> metric_for_;
  std::vector<double> host_results_;
  bool host_current_ = false;
  enum class Graphs { on, off };
  Graphs graphs_ = Graphs::on;  // off: TANDEM_CUDA_GRAPHS=0, a layer that cannot be captured, or
                                // a capture that failed
  std::map<StepKey, cudaGraphExec_t> graphs_by_step_;
  std::set<StepKey> seen_steps_;
  std::int64_t allocations_at_capture_ = 0;  // the allocator's count when graphs were captured
};

}  // namespace

std::unique_ptr<Replica> make_cuda_replica(Model& model, Optimizer& optimizer, DeviceSpec device,
                                           Precision precision, Communicator& communicator,
                                           int participant) {
  return std::make_unique<CudaReplica>(model, optimizer, device, precision, communicator,
                                       participant);
}

}  // namespace tandem::detail
