// Private (nn): the recurrent products of Keras' GRU with reset_after false (Keras 2.2's default,
// the original GRU, ONNX's linear_before_reset 0): the reset gate applied to h_prev before the
// recurrent kernel, hh = activation(x_h + (r ⊙ h_prev)·U_h), so a step's products come in two
// rounds — h_prev·[U_z U_r], then r, then (r ⊙ h_prev)·U_h — where the default GRU takes them in
// one (nn/recurrent.cpp). Written with backend operations (GEMMs, column copies, the
// activation, products), so it runs on any backend; the cell's own arithmetic stays
// recurrent_math.hpp's gru_unit_* (RecurrentCellDesc::reset_before).
//
// Ownership: a Recurrent layer owns one and calls it from its forward and backward (one thread
// at a time). The tensors passed in are borrowed for the call.
#pragma once

#include <cstdint>

#include "backend/ops.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class GruResetBefore {
 public:
  /// Before a forward's steps: the recurrent kernel (units, 3·units) split as the products read
  /// it, and room for `steps` steps of `rows` rows.
  void begin(backend::Backend& ops, const Tensor& recurrent_kernel, std::int64_t units,
             std::int64_t steps, std::int64_t rows);
  /// Step s's products into rec (rows, 3·units: z, r, h): h_in·U_z, h_in·U_r and
  /// (r ⊙ h_in)·U_h, with r = recurrent_activation(xw_r + h_in·U_r).
  void products(backend::Backend& ops, const backend::RecurrentCellDesc& cell, std::int64_t s,
                const Tensor& xw, const Tensor& h_in, Tensor& rec);
  /// After gru_step_backward of step s (which leaves d_xw's and d_rec's r columns 0 and puts
  /// dL/d(rec_h) in d_rec's h columns): the r columns of both, from `pre` (the step's) and h_in.
  void step_gradient(backend::Backend& ops, const backend::RecurrentCellDesc& cell,
                     const Tensor& pre, const Tensor& h_in, Tensor& d_xw, Tensor& d_rec);
  /// dL/dh_in through the products of the step whose step_gradient ran last: d_rec's z and r
  /// columns times [U_z U_r]ᵀ, plus dL/d(r ⊙ h_in) ⊙ r.
  void input_gradient(backend::Backend& ops, const Tensor& d_rec, Tensor& dh_in);
  /// The recurrent kernel's gradient over every step (time-major rows): h_inᵀ·d_rec for the z and
  /// r columns, (r ⊙ h_in)ᵀ·d_rec for the h columns.
  void kernel_gradient(backend::Backend& ops, const Tensor& h_in, const Tensor& d_rec,
                       Tensor& grad);

 private:
  /// Columns [from, from + width) of a matrix of `cols` columns, as a matrix of their own.
  void columns(backend::Backend& ops, const Tensor& m, std::int64_t cols, std::int64_t from,
               std::int64_t width, Tensor& out);

  std::int64_t units_ = 0, rows_ = 0;
  Tensor zr_kernel_, h_kernel_;   // the recurrent kernel's z and r columns; its h columns
  Tensor reset_h_;                // per step, r ⊙ h_in (time-major, as the layer's states)
  Tensor zr_, part_, r_, pre_r_;  // one step's scratch
  Tensor d_reset_h_, d_zr_, zr_grad_, h_grad_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
