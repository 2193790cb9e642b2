#include "cuda/backend/cuda_grouped_convolution.hpp"

#include "cuda/backend/cuda_backend.hpp"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

class CudaGroupedConvolution final : public backend::Convolution2D {
 public:
  CudaGroupedConvolution(const backend::ConvolutionDesc& desc, CudaBackend& ops)
      : ops_(ops), desc_(desc) {}

  void forward(const Tensor& x, const Tensor& kernel, const Tensor* bias, Tensor& y) override {
    const backend::window::Geometry& g = desc_.geometry;
    const std::int64_t batch = batch_of(x);
    ops_.place(y, backend::window_output_shape(g, batch, desc_.filters));
    grouped_conv_forward(x.data(), kernel.data(), desc_.use_bias && bias ? bias->data() : nullptr,
                         y.data(), batch, g, desc_.filters, desc_.groups, ops_.stream());
  }

  void backward_weights(const Tensor& x, const Tensor& dy, Tensor& d_kernel,
                        Tensor* d_bias) override {
    grouped_conv_backward_weights(x.data(), dy.data(), d_kernel.data(),
                                  desc_.use_bias && d_bias ? d_bias->data() : nullptr,
                                  batch_of(x), desc_.geometry, desc_.filters, desc_.groups,
                                  ops_.stream());
  }

  void backward_data(const Tensor& dy, const Tensor& kernel, Tensor& dx) override {
    const backend::window::Geometry& g = desc_.geometry;
    const std::int64_t batch = batch_of(dy);
    ops_.place(dx, backend::window_input_shape(g, batch));
    grouped_conv_backward_data(dy.data(), kernel.data(), dx.data(), batch, g, desc_.filters,
                               desc_.groups, ops_.stream());
  }

 private:
  static std::int64_t batch_of(const Tensor& t) { return t.rank() > 0 ? t.dim(0) : 0; }

  CudaBackend& ops_;
  backend::ConvolutionDesc desc_;
};

}  // namespace

std::unique_ptr<backend::Convolution2D> make_grouped_convolution(
    const backend::ConvolutionDesc& desc, CudaBackend& ops) {
  return std::make_unique<CudaGroupedConvolution>(desc, ops);
}

}  // namespace tandem::cuda
