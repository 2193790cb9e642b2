// The CUDA replica (parallel/replica.hpp): a copy of the host model resident on one GPU — the
// model's own layers (a clone of the host model) computing on the replica's CUDA backend
// (cuda/backend/cuda_backend.hpp), so every layer, loss, metric and optimizer is the one class the
// CPU runs.
//
// Layout: every parameter of the device model is a view into one flat device tensor of values,
// trainable ones first (in trainable_parameters() order), each starting on a 256-byte boundary
// (cuBLASLt's preferred alignment; the gaps stay zero); the gradients and each optimizer slot are
// flat tensors of the same layout as the trainable part, so one fused optimizer launch and one
// all-reduce cover every parameter. A step: the batch to the device, the model's forward, the loss
// and metric sums in double on the device, the model's backward; one copy of the sums back and
// one synchronization.
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
//
// CUDA graphs: a training step is captured the second time a step of its shape comes and replayed
// after (one launch for launch-bound models), unless TANDEM_CUDA_GRAPHS=0, a step needed the host
// (CudaBackend::captured_safely), or a capture failed.
//
// Ownership: owns its streams, allocator, backend, device model and buffers (RAII, destroyed in
// reverse order of declaration, after the streams drained); borrows the host model, optimizer and
// communicator. Thread-safety: one thread at a time (its worker thread during a step).
#include <cuda_runtime_api.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "cuda/backend/cuda_backend.hpp"
#include "parallel/cuda_module_api.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/cuda_handles.hpp"
#include "cuda/ops/dense_gemm.hpp"
#include "cuda/ops/device_allocator.hpp"
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

// The NCCL communicator's stream interface, or null when there is nothing to sum.
cuda::StreamReducer* stream_reducer(Communicator& communicator) {
  if (communicator.size() <= 1 && !communicator.spans_world()) return nullptr;
  auto* reducer = dynamic_cast<cuda::StreamReducer*>(&communicator);
  if (!reducer)
    throw ConfigError("devices", "CUDA replicas need the \"nccl\" communicator, not \"" +
                                     communicator.name() + "\"");
  return reducer;
}

// Where the parameters live on the device: offsets into the flat tensors (see above).
struct ParameterLayout {
  std::vector<std::int64_t> offsets;   // per parameter, in Model::parameters() order
  std::vector<bool> trainable;         // per parameter: among trainable_parameters()
  std::vector<std::int64_t> segments;  // trainable tensors' offsets, then the trainable total
  std::int64_t trainable_floats = 0;   // the trainable part, with alignment gaps
  std::int64_t total_floats = 0;
};

ParameterLayout plan_layout(Model& model) {
  ParameterLayout layout;
  const auto all = model.parameters();
  const auto trainable = model.trainable_parameters();
  layout.offsets.assign(all.size(), -1);
  layout.trainable.assign(all.size(), false);
  std::int64_t offset = 0;
  for (Parameter* p : trainable) {
    const auto i = static_cast<std::size_t>(std::find(all.begin(), all.end(), p) - all.begin());
    layout.offsets[i] = offset;
    layout.trainable[i] = true;
    layout.segments.push_back(offset);
    offset += aligned(p->value.size());
  }
  layout.trainable_floats = offset;
  layout.segments.push_back(offset);
  for (std::size_t i = 0; i < all.size(); ++i)
    if (layout.offsets[i] < 0) {
      layout.offsets[i] = offset;
      offset += aligned(all[i]->value.size());
    }
  layout.total_floats = offset;
  return layout;
}

class CudaReplica : public Replica {
 public:
  CudaReplica(Model& model, Optimizer& optimizer, DeviceSpec device, Precision precision,
              Communicator& communicator, int participant)
      : model_(model),
        optimizer_(optimizer),
        device_(device),
        participant_(participant),
        reducer_(stream_reducer(communicator)),
        stream_(device.index),
        copy_stream_(device.index),
        reduce_stream_(device.index) {
    use_device(device_.index);
    allocator_ = std::make_shared<cuda::DeviceAllocator>(device_.index);
    gemm_ = std::make_unique<cuda::DenseGemm>(*allocator_, stream(), device_precision(precision));
    backend_ = std::make_unique<cuda::CudaBackend>(allocator_, stream(), *gemm_,
                                                   device_precision(precision));
    build_device_model();
    plan_buckets();
    sums_ = backend_->sums();
    cuda::check(cudaStreamSynchronize(stream()), "the CUDA replica's set-up");
    const char* env = std::getenv("TANDEM_CUDA_GRAPHS");
    if (env && std::string(env) == "0") graphs_ = Graphs::off;
  }

  ~CudaReplica() override {
    cudaSetDevice(device_.index);
    cudaStreamSynchronize(copy_stream_.get());  // no copy may still write into a slot
    cudaStreamSynchronize(stream());
    clear_graphs();
  }

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
      // queues the same reductions), and Dropout's training calls counted.
      backend_->fill(grads_, 0.0f);
      backend_->count_dropout_calls();
      for (std::size_t l = device_model_->layer_count(); l-- > 0;) reduce_bucket_of(l);
      join_reductions();
      stage_next(x, y, next);
      finish_step();
      StepSums sums;
      sums.metrics.resize(metrics.size());
      return sums;
    }
    const StepKey key{rows,         sample_offset,        loss_scale,          &loss,
                      metric_keys(metrics), input().x.data(), input().y.data()};
    const backend::LossDesc loss_desc = loss.desc();
    const auto enqueue = [&] {
      const Tensor& out = device_model_->forward(input().x, true, sample_offset);
      enqueue_sums(out, loss_desc, loss_scale, &loss_grad_, metrics);
      device_model_->backward(loss_grad_, [&](std::size_t l) { reduce_bucket_of(l); });
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
    const Tensor& out = device_model_->forward(input().x, false, sample_offset);
    enqueue_sums(out, loss.desc(), 1.0f, nullptr, metrics);
    return read_sums(rows, metrics.size());
  }

  void predict(const Tensor& x, std::int64_t sample_offset, float* out) override {
    use_device(device_.index);
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    if (rows == 0) return;
    place_batch(x, Tensor(), nullptr);
    const Tensor& y = device_model_->forward(input().x, false, sample_offset);
    cuda::check(cudaMemcpyAsync(out, y.data(), static_cast<std::size_t>(y.size()) * sizeof(float),
                                cudaMemcpyDeviceToHost, stream()),
                "copy of the outputs to the host");
    finish_step();
  }

  float* gradients() override { return grads_.data(); }
  std::size_t gradient_count() const override {
    return static_cast<std::size_t>(layout_.trainable_floats);
  }
  bool sums_gradients() const override { return reducer_ != nullptr; }

  void apply_update() override {
    use_device(device_.index);
    if (layout_.trainable_floats == 0) return;
    // The host optimizer's counters are the truth (Optimizer::apply's order: count, then step).
    optimizer_.set_iterations(optimizer_.iterations() + 1);
    backend_->optimizer_update(optimizer_.desc(), optimizer_.iterations(),
                               optimizer_.learning_rate(), update_tensors_);
    // Left in flight: the next step's work queues behind it on this stream, and pull() and the
    // next step's sums synchronize.
    cuda::check(cudaGetLastError(), "the optimizer update");
    host_current_ = false;
  }

  void set_learning_rate(double lr) override { optimizer_.set_learning_rate(lr); }

  void pull() override {
    if (host_current_) return;
    use_device(device_.index);
    const auto host = model_.parameters();
    for (std::size_t i = 0; i < host.size(); ++i)
      copy_to_host(host[i]->value.data(), values_.data() + layout_.offsets[i],
                   host[i]->value.size());
    const auto trainable = model_.trainable_parameters();
    if (!slots_.empty()) {
      if (optimizer_.slotted_params() != trainable.size()) optimizer_.create_slots(trainable);
      for (std::size_t i = 0; i < trainable.size(); ++i)
        for (std::size_t s = 0; s < slots_.size(); ++s)
          copy_to_host(optimizer_.slots(i)[s].data(), slots_[s].data() + layout_.segments[i],
                       trainable[i]->value.size());
    }
    cuda::check(cudaStreamSynchronize(stream()), "copy of the weights to the host");
    const auto calls = backend_->dropout_calls();
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
    const auto host = model_.parameters();
    for (std::size_t i = 0; i < host.size(); ++i)
      copy_to_device(values_.data() + layout_.offsets[i], host[i]->value.data(),
                     host[i]->value.size(), stream());
    const auto trainable = model_.trainable_parameters();
    const bool slotted = optimizer_.slotted_params() == trainable.size() && !trainable.empty();
    for (Tensor& s : slots_) backend_->fill(s, 0.0f);
    if (slotted)
      for (std::size_t i = 0; i < trainable.size(); ++i)
        for (std::size_t s = 0; s < slots_.size(); ++s)
          copy_to_device(slots_[s].data() + layout_.segments[i], optimizer_.slots(i)[s].data(),
                         trainable[i]->value.size(), stream());
    cuda::check(cudaStreamSynchronize(stream()), "copy of the weights to the device");
    for (std::size_t l = 0; l < model_.layer_count(); ++l) {
      const auto state = model_.layer(l).random_state();
      if (state.empty()) continue;
      device_model_->layer(l).set_random_state(state);
      if (state.size() == 2) backend_->set_dropout_calls(state[0], state[1]);
    }
    host_current_ = true;
  }

 private:
  cudaStream_t stream() const { return stream_.get(); }

  // The device model: a clone of the host model whose layers compute on the backend and whose
  // parameters are views into the flat tensors; the optimizer's slots likewise.
  void build_device_model() {
    device_model_ = model_.clone();
    for (std::size_t l = 0; l < model_.layer_count(); ++l) {
      device_model_->layer(l).set_trainable(model_.layer(l).trainable());
      device_model_->layer(l).set_backend(*backend_);
    }
    layout_ = plan_layout(*device_model_);
    values_ = backend_->tensor({std::max<std::int64_t>(layout_.total_floats, 1)});
    grads_ = backend_->tensor({std::max<std::int64_t>(layout_.trainable_floats, 1)});
    backend_->fill(values_, 0.0f);
    backend_->fill(grads_, 0.0f);
    const auto params = device_model_->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      Parameter& p = *params[i];
      const Shape shape = p.value.shape();
      p.value = Tensor::view(values_, layout_.offsets[i], shape);
      p.grad = layout_.trainable[i] ? Tensor::view(grads_, layout_.offsets[i], shape) : Tensor();
    }
    const std::size_t slot_count = optimizer_.slot_names().size();
    for (std::size_t s = 0; s < slot_count; ++s) {
      slots_.push_back(backend_->tensor({std::max<std::int64_t>(layout_.trainable_floats, 1)}));
      backend_->fill(slots_.back(), 0.0f);
    }
    const auto trainable = device_model_->trainable_parameters();
    slot_views_.resize(trainable.size());
    for (std::size_t i = 0; i < trainable.size(); ++i) {
      for (Tensor& s : slots_)
        slot_views_[i].push_back(
            Tensor::view(s, layout_.segments[i], trainable[i]->value.shape()));
      update_tensors_.push_back({&trainable[i]->value, &trainable[i]->grad, &slot_views_[i]});
    }
    push();
  }

  // Buckets of whole layers' trainable gradients (gradient_buckets.hpp): a layer's trainable
  // parameters are contiguous in the flat layout, with their alignment gaps up to the next
  // layer's. bucket_of_layer_[l] is the range whose all-reduce starts once layer l's backward has
  // run, or empty.
  void plan_buckets() {
    const std::size_t layers = device_model_->layer_count();
    bucket_of_layer_.assign(layers, {0, 0});
    if (!reducer_ || layout_.trainable_floats == 0) return;
    const auto all = device_model_->parameters();
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges(layers, {0, 0});
    std::int64_t next_begin = layout_.trainable_floats;
    for (std::size_t l = layers; l-- > 0;) {
      std::int64_t begin = next_begin;
      for (Parameter* p : device_model_->layer(l).parameters()) {
        const auto i = static_cast<std::size_t>(std::find(all.begin(), all.end(), p) - all.begin());
        if (layout_.trainable[i]) begin = std::min(begin, layout_.offsets[i]);
      }
      ranges[l] = {begin, begin == next_begin ? begin : next_begin};
      next_begin = begin;
    }
    for (const auto& b : cuda::plan_gradient_buckets(ranges, layout_.trainable_floats,
                                                     kFirstBucketFloats, kBucketFloats))
      bucket_of_layer_[b.after_layer] = {b.begin, b.end};
  }

  // Queues the all-reduce of the bucket that ends with layer l's gradients, behind them.
  void reduce_bucket_of(std::size_t l) {
    if (!reducer_) return;
    const auto [begin, end] = bucket_of_layer_[l];
    if (begin == end) return;
    cuda::check(cudaEventRecord(grads_ready_.get(), stream()), "cudaEventRecord");
    cuda::check(cudaStreamWaitEvent(reduce_stream_.get(), grads_ready_.get(), 0),
                "cudaStreamWaitEvent");
    reducer_->all_reduce_on_stream(participant_, grads_.data() + begin,
                                   static_cast<std::size_t>(end - begin), reduce_stream_.get());
    reductions_queued_ = true;
  }

  // The step's stream waits for every reduction queued since the last join (and, in a capture,
  // joins them into it).
  void join_reductions() {
    if (!reductions_queued_) return;
    reductions_queued_ = false;
    cuda::check(cudaEventRecord(reduced_.get(), reduce_stream_.get()), "cudaEventRecord");
    cuda::check(cudaStreamWaitEvent(stream(), reduced_.get(), 0), "cudaStreamWaitEvent");
  }

  // A device copy of a batch's rows: x, and y when the step has a loss.
  struct InputSlot {
    Tensor x, y;            // on the device
    Tensor host_x, host_y;  // the host rows it holds (kept alive while held), when reusable
    bool reusable = false;  // the caller promised host_x/host_y unchanged (NextRows)
  };

  InputSlot& input() { return inputs_[current_]; }

  static bool same_rows(const Tensor& a, const Tensor& b) {
    return a.data() == b.data() && a.shape() == b.shape();
  }

  // The batch to the device (and with a loss, its targets: sparse labels checked on the host
  // first, as the CPU loss does) into input(): taken from the other slot when it was staged
  // there, kept when input() holds it and it was promised unchanged, copied otherwise.
  void place_batch(const Tensor& x, const Tensor& y, const Loss* loss) {
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    allocator_->set_context("a batch of " + std::to_string(rows) + " samples on this replica");
    if (loss && rows > 0 && loss->desc().kind == backend::LossDesc::Kind::scce)
      backend::check_sparse_labels(y, shape_size(model_.output_shape()));
    const bool with_y = loss != nullptr;
    const auto holds = [&](const InputSlot& slot) {
      return slot.reusable && same_rows(slot.host_x, x) && (!with_y || same_rows(slot.host_y, y));
    };
    InputSlot& other = inputs_[1 - current_];
    if (staged_ && holds(other)) {
      cuda::check(cudaStreamWaitEvent(stream(), staged_ready_.get(), 0), "cudaStreamWaitEvent");
      current_ = 1 - current_;
      staged_ = false;
    } else if (!holds(input())) {
      InputSlot& slot = input();
      backend_->place(slot.x, x.shape());
      copy_to_device(slot.x.data(), x.data(), x.size(), stream());
      if (with_y) {
        backend_->place(slot.y, y.shape());
        copy_to_device(slot.y.data(), y.data(), y.size(), stream());
      }
    }
    // Used now: the promise was until this step.
    input().reusable = false;
    input().host_x = Tensor(), input().host_y = Tensor();
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
      // use by the step just queued. Only when a slot grows: the first steps of a batch size.
      cuda::check(cudaStreamSynchronize(copy_stream_.get()), "a staged copy");
      cuda::check(cudaStreamSynchronize(stream()), "the training step");
    }
    backend_->place(slot.x, next->x.shape());
    backend_->place(slot.y, next->y.shape());
    copy_to_device(slot.x.data(), next->x.data(), next->x.size(), copy_stream_.get());
    copy_to_device(slot.y.data(), next->y.data(), next->y.size(), copy_stream_.get());
    cuda::check(cudaEventRecord(staged_ready_.get(), copy_stream_.get()), "cudaEventRecord");
    slot.host_x = next->x, slot.host_y = next->y;
    slot.reusable = true;
    staged_ = true;
  }

  // The loss and metric sums of the last forward, in double on the device (queued only).
  void enqueue_sums(const Tensor& out, const backend::LossDesc& loss, float loss_scale,
                    Tensor* loss_grad, const Metrics& metrics) {
    const std::int64_t cols = shape_size(model_.output_shape());
    sums_->reset(1 + metrics.size());
    backend_->loss_sum(loss, out, input().y, cols, loss_scale, loss_grad, *sums_, 0);
    for (std::size_t m = 0; m < metrics.size(); ++m)
      backend_->metric_sum(metrics[m]->desc(), out, input().y, cols, *sums_, 1 + m);
  }

  // One copy of the sums back: the step's one synchronization.
  StepSums read_sums(std::int64_t rows, std::size_t metric_count) {
    const std::vector<double> values = sums_->read();
    StepSums sums;
    sums.loss = {values[0], static_cast<double>(rows)};
    sums.metrics.resize(metric_count);
    for (std::size_t m = 0; m < metric_count; ++m)
      sums.metrics[m] = {values[1 + m], static_cast<double>(rows)};
    return sums;
  }

  static std::vector<const Metric*> metric_keys(const Metrics& metrics) {
    std::vector<const Metric*> keys;
    for (const auto& m : metrics) keys.push_back(m.get());
    return keys;
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
      cuda::check(cudaGraphLaunch(it->second, stream()), "cudaGraphLaunch (the training step)");
      return;
    }
    if (!seen_steps_.count(key)) {
      seen_steps_.insert(key);
      backend_->reset_capture_check();
      enqueue();
      // A step that needed the host (an Embedding's index check) cannot be replayed.
      if (!backend_->captured_safely()) {
        spdlog::debug("cuda:{}: this model's step synchronizes with the host; no CUDA graphs",
                      device_.index);
        graphs_ = Graphs::off;
      }
      return;
    }
    if (graphs_by_step_.size() >= kMaxGraphs) clear_graphs();  // e.g. a changing last batch
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    std::string failure;
    cuda::check(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal),
                "cudaStreamBeginCapture");
    try {
      enqueue();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    const cudaError_t ended = cudaStreamEndCapture(stream(), &graph);
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
    cuda::check(cudaGraphLaunch(exec, stream()), "cudaGraphLaunch (the training step)");
  }

  void clear_graphs() {
    for (auto& [key, exec] : graphs_by_step_) cudaGraphExecDestroy(exec);
    graphs_by_step_.clear();
    seen_steps_.clear();
    if (allocator_) allocations_at_capture_ = allocator_->stats().allocations;
  }

  void finish_step() { cuda::check(cudaStreamSynchronize(stream()), "the training step"); }

  static void copy_to_device(float* dst, const float* src, std::int64_t n, cudaStream_t stream) {
    if (n > 0)
      cuda::check(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float),
                                  cudaMemcpyHostToDevice, stream),
                  "copy to the device");
  }

  void copy_to_host(float* dst, const float* src, std::int64_t n) {
    if (n > 0)
      cuda::check(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream()),
                  "copy to the host");
  }

  Model& model_;
  Optimizer& optimizer_;
  DeviceSpec device_;
  int participant_;                         // in the communicator
  cuda::StreamReducer* reducer_;            // the NCCL communicator; null: nothing to sum
  cuda::CudaStream stream_;                 // the step's work
  cuda::CudaStream copy_stream_;            // staged batches
  cuda::CudaStream reduce_stream_;          // gradient all-reduces
  cuda::CudaEvent staged_ready_;            // the last staged copy is done
  cuda::CudaEvent grads_ready_, reduced_;   // a bucket's gradients exist; the reductions ended
  std::shared_ptr<cuda::DeviceAllocator> allocator_;
  std::unique_ptr<cuda::DenseGemm> gemm_;
  std::unique_ptr<cuda::CudaBackend> backend_;
  std::unique_ptr<Model> device_model_;  // the host model's clone, on backend_
  ParameterLayout layout_;
  Tensor values_, grads_;                          // flat (see above)
  std::vector<Tensor> slots_;                      // flat optimizer slots
  std::vector<std::vector<Tensor>> slot_views_;    // per trainable parameter
  std::vector<backend::UpdateTensors> update_tensors_;
  std::unique_ptr<backend::Sums> sums_;
  Tensor loss_grad_;
  bool reductions_queued_ = false;  // since the last join_reductions()
  std::vector<std::pair<std::int64_t, std::int64_t>> bucket_of_layer_;  // [begin, end) per layer
  InputSlot inputs_[2];
  int current_ = 0;      // the slot of the last step
  bool staged_ = false;  // the other slot holds staged rows (staged_ready_ marks the copy)
  bool host_current_ = false;
  enum class Graphs { on, off };
  Graphs graphs_ = Graphs::on;
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
