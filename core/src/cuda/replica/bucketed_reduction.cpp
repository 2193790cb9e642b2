#include "cuda/replica/bucketed_reduction.hpp"

#include <algorithm>

#include "cuda/replica/gradient_buckets.hpp"

namespace tandem::cuda {

namespace {

// The first bucket (the last layers, whose gradients exist first) small, so its all-reduce starts
// early; the others large enough that NCCL runs at full bandwidth.
constexpr std::int64_t kFirstBucketFloats = std::int64_t{1} << 18;  // 1 MiB
constexpr std::int64_t kBucketFloats = std::int64_t{1} << 22;       // 16 MiB

// Each layer's trainable gradients [begin, end) in the flat layout: a layer's trainable
// parameters are contiguous, with their alignment gaps up to the next layer's.
std::vector<std::pair<std::int64_t, std::int64_t>> layer_ranges(Model& model,
                                                               const ParameterLayout& layout) {
  const std::size_t layers = model.layer_count();
  const auto all = model.parameters();
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges(layers, {0, 0});
  std::int64_t next_begin = layout.trainable_floats;
  for (std::size_t l = layers; l-- > 0;) {
    std::int64_t begin = next_begin;
    for (Parameter* p : model.layer(l).parameters()) {
      const auto i = static_cast<std::size_t>(std::find(all.begin(), all.end(), p) - all.begin());
      if (layout.trainable[i]) begin = std::min(begin, layout.offsets[i]);
    }
    ranges[l] = {begin, begin == next_begin ? begin : next_begin};
    next_begin = begin;
  }
  return ranges;
}

}  // namespace

BucketedReduction::BucketedReduction(StreamCommunicator* communicator, int participant,
                                     int device, Model& device_model,
                                     const ParameterLayout& layout, Tensor& gradients)
    : communicator_(communicator),
      participant_(participant),
      gradients_(gradients),
      reduce_stream_(device),
      bucket_of_layer_(device_model.layer_count(), {0, 0}) {
  if (!communicator_ || layout.trainable_floats == 0) return;
  for (const auto& b : plan_gradient_buckets(layer_ranges(device_model, layout),
                                             layout.trainable_floats, kFirstBucketFloats,
                                             kBucketFloats))
    bucket_of_layer_[b.after_layer] = {b.begin, b.end};
}

void BucketedReduction::after_backward_of(std::size_t layer, cudaStream_t step) {
  if (!communicator_) return;
  const auto [begin, end] = bucket_of_layer_[layer];
  if (begin == end) return;
  check(cudaEventRecord(grads_ready_.get(), step), "cudaEventRecord");
  check(cudaStreamWaitEvent(reduce_stream_.get(), grads_ready_.get(), 0), "cudaStreamWaitEvent");
  Tensor bucket = Tensor::view(gradients_, begin, {end - begin});
  communicator_->all_reduce_on_stream(participant_, bucket, reduce_stream_.get());
  queued_ = true;
}

void BucketedReduction::join(cudaStream_t step) {
  if (!queued_) return;
  queued_ = false;
  check(cudaEventRecord(reduced_.get(), reduce_stream_.get()), "cudaEventRecord");
  check(cudaStreamWaitEvent(step, reduced_.get(), 0), "cudaStreamWaitEvent");
}

}  // namespace tandem::cuda
