// Backend::dense_products' default (backend/ops.hpp): each product one gemm() of the backend, as
// stored — nothing prepared, nothing kept between calls.
#include "backend/ops.hpp"

namespace tandem::backend {

namespace {

class GemmDenseProducts final : public DenseProducts {
 public:
  GemmDenseProducts(Backend& ops, const DenseProductDesc& desc) : ops_(ops), desc_(desc) {}

  void forward(const Tensor& x, const Tensor& kernel, const Tensor* bias, Tensor& y) override {
    ops_.gemm({false, false, rows(x), desc_.units, desc_.in, desc_.epilogue}, x, kernel, bias, y);
  }

  void backward(const Tensor& x, const Tensor& dy, const Tensor& kernel, Tensor* d_kernel,
                Tensor* dx) override {
    const std::int64_t r = rows(x);
    if (d_kernel) ops_.gemm({true, false, desc_.in, desc_.units, r}, x, dy, nullptr, *d_kernel);
    if (dx) ops_.gemm({false, true, r, desc_.in, desc_.units}, dy, kernel, nullptr, *dx);
  }

 private:
  std::int64_t rows(const Tensor& x) const { return desc_.in > 0 ? x.size() / desc_.in : 0; }

  Backend& ops_;
  DenseProductDesc desc_;
};

}  // namespace

std::unique_ptr<DenseProducts> Backend::dense_products(const DenseProductDesc& desc) {
  return std::make_unique<GemmDenseProducts>(*this, desc);
}

}  // namespace tandem::backend
