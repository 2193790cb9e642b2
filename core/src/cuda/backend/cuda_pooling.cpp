// The CUDA backend's 2-D pooling (backend::Pooling2D): keeps max pooling's argmax between a
// forward and its backward, around the kernels of cuda/ops/layer_kernels.hpp (the CPU backend's
// window order and tie rule).
//
// Ownership: owns its buffers; borrows the backend, which outlives it. Thread-safety: one thread
// at a time; all work on the backend's stream.
#include "cuda/backend/cuda_backend.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/layer_kernels.hpp"
#include "tandem/error.hpp"

namespace tandem::cuda {

namespace {

class CudaPooling final : public backend::Pooling2D {
 public:
  CudaPooling(const backend::PoolingDesc& desc, CudaBackend& ops) : desc_(desc), ops_(ops) {}

  void forward(const Tensor& x, Tensor& y) override {
    const backend::window::Geometry& g = desc_.geometry;
    batch_ = x.rank() > 0 ? x.dim(0) : 0;
    ops_.place(y, backend::window_output_shape(g, batch_, g.channels));
    if (batch_ == 0) return;
    if (desc_.kind == backend::PoolKind::max) {
      argmax_.resize(ops_.allocator(), y.size());  // int32 per output
      max_pool_forward(x.data(), y.data(), reinterpret_cast<std::int32_t*>(argmax_.data()), batch_,
                       g, ops_.stream());
    } else {
      avg_pool_forward(x.data(), y.data(), batch_, g, ops_.stream());
    }
  }

  void backward(const Tensor& dy, Tensor& dx) override {
    const backend::window::Geometry& g = desc_.geometry;
    ops_.place(dx, backend::window_input_shape(g, batch_));
    if (batch_ == 0) return;
    if (desc_.kind == backend::PoolKind::max)
      max_pool_backward(dy.data(), reinterpret_cast<const std::int32_t*>(argmax_.data()),
                        dx.data(), batch_, g, ops_.stream());
    else
      avg_pool_backward(dy.data(), dx.data(), batch_, g, ops_.stream());
  }

 private:
  backend::PoolingDesc desc_;
  CudaBackend& ops_;
  std::int64_t batch_ = 0;
  DeviceBuffer argmax_;
};

}  // namespace

std::unique_ptr<backend::Pooling2D> CudaBackend::pooling(const backend::PoolingDesc& desc) {
  return std::make_unique<CudaPooling>(desc, *this);
}

}  // namespace tandem::cuda
