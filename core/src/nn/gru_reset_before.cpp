#include "nn/gru_reset_before.hpp"

namespace tandem::nn {

void GruResetBefore::columns(backend::Backend& ops, const Tensor& m, std::int64_t cols,
                             std::int64_t from, std::int64_t width, Tensor& out) {
  ops.copy_columns(m, cols, from, ops.place(out, {m.size() / cols, width}), width, 0, width);
}

void GruResetBefore::begin(backend::Backend& ops, const Tensor& recurrent_kernel,
                           std::int64_t units, std::int64_t steps, std::int64_t rows) {
  units_ = units;
  rows_ = rows;
  columns(ops, recurrent_kernel, 3 * units, 0, 2 * units, zr_kernel_);
  columns(ops, recurrent_kernel, 3 * units, 2 * units, units, h_kernel_);
  ops.place(reset_h_, {steps * rows, units});
}

void GruResetBefore::products(backend::Backend& ops, const backend::RecurrentCellDesc& cell,
                              std::int64_t s, const Tensor& xw, const Tensor& h_in, Tensor& rec) {
  const std::int64_t u = units_;
  ops.gemm({false, false, rows_, 2 * u, u}, h_in, zr_kernel_, nullptr,
           ops.place(zr_, {rows_, 2 * u}));
  ops.copy_columns(zr_, 2 * u, 0, rec, 3 * u, 0, 2 * u);
  // r as the cell computes it: recurrent_activation(xw_r + rec_r), the same float sum.
  columns(ops, xw, 3 * u, u, u, pre_r_);
  columns(ops, zr_, 2 * u, u, u, part_);
  ops.add(pre_r_, part_, pre_r_);
  ops.activation_forward(cell.recurrent_activation, pre_r_, ops.place(r_, {rows_, u}), u);
  Tensor reset_h = Tensor::view(reset_h_, s * rows_ * u, {rows_, u});
  ops.multiply(r_, h_in, reset_h);
  ops.gemm({false, false, rows_, u, u}, reset_h, h_kernel_, nullptr, ops.place(part_, {rows_, u}));
  ops.copy_columns(part_, u, 0, rec, 3 * u, 2 * u, u);
}

void GruResetBefore::step_gradient(backend::Backend& ops, const backend::RecurrentCellDesc& cell,
                                   const Tensor& pre, const Tensor& h_in, Tensor& d_xw,
                                   Tensor& d_rec) {
  const std::int64_t u = units_;
  // dL/d(r ⊙ h_in) = dL/d(rec_h)·U_hᵀ.
  columns(ops, d_rec, 3 * u, 2 * u, u, part_);
  ops.gemm({false, true, rows_, u, u}, part_, h_kernel_, nullptr,
           ops.place(d_reset_h_, {rows_, u}));
  // r from its pre-activation, which `pre` keeps; dL/d(pre_r) = dL/d(r ⊙ h_in) ⊙ h_in ⊙ ra'.
  columns(ops, pre, 4 * u, u, u, pre_r_);
  ops.activation_forward(cell.recurrent_activation, pre_r_, ops.place(r_, {rows_, u}), u);
  ops.multiply(d_reset_h_, h_in, ops.place(part_, {rows_, u}));
  ops.activation_backward(cell.recurrent_activation, pre_r_, r_, part_, part_, u);
  ops.copy_columns(part_, u, 0, d_xw, 3 * u, u, u);
  ops.copy_columns(part_, u, 0, d_rec, 3 * u, u, u);
  ops.multiply(d_reset_h_, r_, d_reset_h_);  // its share of dL/dh_in, for input_gradient
}

void GruResetBefore::input_gradient(backend::Backend& ops, const Tensor& d_rec, Tensor& dh_in) {
  const std::int64_t u = units_;
  columns(ops, d_rec, 3 * u, 0, 2 * u, d_zr_);
  ops.gemm({false, true, rows_, u, 2 * u}, d_zr_, zr_kernel_, nullptr, dh_in);
  ops.add(dh_in, d_reset_h_, dh_in);
}

void GruResetBefore::kernel_gradient(backend::Backend& ops, const Tensor& h_in, const Tensor& d_rec,
                                     Tensor& grad) {
  const std::int64_t u = units_, rows = reset_h_.dim(0);  // every step's
  columns(ops, d_rec, 3 * u, 0, 2 * u, d_zr_);
  ops.gemm({true, false, u, 2 * u, rows}, h_in, d_zr_, nullptr, ops.place(zr_grad_, {u, 2 * u}));
  ops.copy_columns(zr_grad_, 2 * u, 0, grad, 3 * u, 0, 2 * u);
  columns(ops, d_rec, 3 * u, 2 * u, u, part_);
  ops.gemm({true, false, u, u, rows}, reset_h_, part_, nullptr, ops.place(h_grad_, {u, u}));
  ops.copy_columns(h_grad_, u, 0, grad, 3 * u, 2 * u, u);
}

}  // namespace tandem::nn
