#include "gpu_dense_stack.hpp"

#include <algorithm>
#include <string>

#include "cuda/ops/cuda_check.hpp"
#include "tandem/error.hpp"

namespace tandem::cuda {

DenseStack::DenseStack(DeviceAllocator& allocator, cudaStream_t stream, Precision precision,
                       std::int64_t input_width, std::vector<DenseSpec> layers)
    : allocator_(allocator),
      stream_(stream),
      gemm_(allocator, stream, precision),
      layers_(std::move(layers)) {
  if (layers_.empty()) throw ShapeError("DenseStack: no layers");
  widths_.push_back(input_width);
  for (const DenseSpec& l : layers_) {
    if (l.units <= 0)
      throw ShapeError("DenseStack: a layer has " + std::to_string(l.units) + " units");
    offsets_.push_back(parameter_count_);
    parameter_count_ += widths_.back() * l.units + l.units;
    widths_.push_back(l.units);
  }
  parameters_.resize(allocator_, parameter_count_);
  gradients_.resize(allocator_, parameter_count_);
  outputs_.resize(layers_.size());
}

void DenseStack::upload_parameters(const float* host) {
  check(cudaMemcpyAsync(parameters_.data(), host,
                        static_cast<std::size_t>(parameter_count_) * sizeof(float),
                        cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (parameters to the GPU)");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void DenseStack::download_parameters(float* host) {
  check(cudaMemcpyAsync(host, parameters_.data(),
                        static_cast<std::size_t>(parameter_count_) * sizeof(float),
                        cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (parameters from the GPU)");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

const float* DenseStack::forward(const float* x, std::int64_t batch) {
  input_ = x;
  batch_ = batch;
  const float* in = x;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    outputs_[l].resize(allocator_, batch * widths_[l + 1]);
    const Activation act = layers_[l].activation;
    const float* w = parameters_.data() + kernel_offset(l);
    const float* b = parameters_.data() + bias_offset(l);
    gemm_.forward(
        in, w, b, outputs_[l].data(), batch, widths_[l], widths_[l + 1],
        act == Activation::relu ? DenseGemm::Epilogue::relu_bias : DenseGemm::Epilogue::bias);
    if (act == Activation::tanh || act == Activation::sigmoid)
      bias_activation(outputs_[l].data(), nullptr, batch, widths_[l + 1], act, stream_);
    in = outputs_[l].data();
  }
  return in;
}

void DenseStack::backward(const float* dy) {
  const std::int64_t widest = *std::max_element(widths_.begin() + 1, widths_.end());
  grad_a_.resize(allocator_, batch_ * widest);
  grad_b_.resize(allocator_, batch_ * widest);
  std::int64_t scratch = 1;
  for (std::size_t l = 0; l < layers_.size(); ++l)
    scratch = std::max(scratch, column_sums_scratch(batch_, widths_[l + 1]));
  scratch_.resize(allocator_, scratch);

  // dz of layer l (dLoss / its pre-activation) goes to `cur`; dx of layer l to `next`.
  float* cur = grad_a_.data();
  float* next = grad_b_.data();
  const float* upstream = dy;
  for (std::size_t l = layers_.size(); l-- > 0;) {
    const std::int64_t in = widths_[l], out = widths_[l + 1];
    const Activation act = layers_[l].activation;
    const float* dz = upstream;
    if (act != Activation::linear) {
      activation_backward(outputs_[l].data(), upstream, cur, batch_ * out, act, stream_);
      dz = cur;
    }
    const float* x = l == 0 ? input_ : outputs_[l - 1].data();
    gemm_.backward_weights(x, dz, gradients_.data() + kernel_offset(l), batch_, in, out);
    column_sums(dz, gradients_.data() + bias_offset(l), batch_, out, scratch_.data(), stream_);
    if (l > 0) {
      gemm_.backward_data(dz, parameters_.data() + kernel_offset(l), next, batch_, in, out);
      upstream = next;
      std::swap(cur, next);
    }
  }
}

}  // namespace tandem::cuda
