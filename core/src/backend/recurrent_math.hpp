// Private: the per-unit arithmetic of one time step of Keras' recurrent cells (LSTM, GRU) and of
// the sequence masks (a step kept, a masked mean over the steps), written
// once as inline functions that nvcc compiles for the device and g++ for the host: the CPU
// backend's loops (backend/cpu/recurrent.cpp) and the CUDA kernels (cuda/ops/recurrent_kernels.cu)
// call these very functions, so the two agree but for the transcendental functions (as
// kernel_math.hpp says).
//
// A step works on rows of the batch; within a row, unit j of `units`. The products with the
// kernels are the caller's (GEMMs): `xw` is the row of x·kernel (+ the input bias), `rec` the row
// of h_prev·recurrent_kernel (+ the GRU's recurrent bias). Gates are in Keras' order: LSTM i, f,
// c, o; GRU z, r, h. `pre` keeps what the backward needs, 4 values a unit:
//   LSTM: the four gates' pre-activations;
//   GRU (reset_after, Keras' default since 2.x): z's and r's pre-activations, the candidate's
//   (x_h + r·rec_h), and rec_h; with reset_before (reset_after false) the candidate's is
//   x_h + rec_h, rec_h being (r ⊙ h_prev)·U_h already.
//
// Header rules: as kernel_math.hpp's.
#pragma once

#include <cstdint>

#include "backend/activation_kind.hpp"
#include "backend/kernel_math.hpp"

namespace tandem::backend {

/// A recurrent cell's step: `units` per row, the output activation (Keras' `activation`) and the
/// gates' (`recurrent_activation`), both element-wise kinds (never softmax).
struct RecurrentCellDesc {
  std::int64_t units = 0;
  ActivationKind activation = ActivationKind::tanh;
  ActivationKind recurrent_activation = ActivationKind::sigmoid;
  /// GRU with Keras' reset_after false: rec_h is already (r ⊙ h_prev)·U_h (nn/gru_reset_before),
  /// so the candidate takes it as it is, and the backward leaves r's gradient to the caller.
  bool reset_before = false;
};

namespace math {

/// An LSTM unit's gates after their activations: i, f and o by the recurrent activation, g by
/// the activation.
struct LstmGates {
  float i, f, g, o;
};

/// The gates of unit j from its pre-activations (pre: 4 units, Keras' order).
TANDEM_HD inline LstmGates lstm_gates(const RecurrentCellDesc& d, const float* pre,
                                      std::int64_t j) {
  const std::int64_t u = d.units;
  return {activation_value(d.recurrent_activation, pre[j]),
          activation_value(d.recurrent_activation, pre[u + j]),
          activation_value(d.activation, pre[2 * u + j]),
          activation_value(d.recurrent_activation, pre[3 * u + j])};
}

/// The unit's new cell state: f·c_prev + i·g.
TANDEM_HD inline float lstm_cell(LstmGates a, float c_prev) {
  return fadd(fmul(a.f, c_prev), fmul(a.i, a.g));
}

/// LSTM unit j: pre (4 units) = xw + rec; i, f, o = recurrent_activation, g = activation of
/// theirs; c = f·c_prev + i·g; h = o·activation(c).
TANDEM_HD inline void lstm_unit_forward(const RecurrentCellDesc& d, const float* xw,
                                        const float* rec, const float* c_prev, float* pre, float* c,
                                        float* h, std::int64_t j) {
  const std::int64_t u = d.units;
  for (int g = 0; g < 4; ++g) pre[g * u + j] = fadd(xw[g * u + j], rec[g * u + j]);
  const LstmGates a = lstm_gates(d, pre, j);
  const float cell = lstm_cell(a, c_prev[j]);
  c[j] = cell;
  h[j] = fmul(a.o, activation_value(d.activation, cell));
}

/// The gradients of unit j given its gates `a` and tc = activation(c[j]) (as the forward computed
/// them): dh = dL/dh of the step (the output's and the next step's); dc holds dL/dc from the next
/// step and is set to dL/dc_prev; d_pre (4 units) = dL/dpre.
TANDEM_HD inline void lstm_unit_gradients(const RecurrentCellDesc& d, LstmGates a, float tc,
                                          const float* pre, const float* c_prev, const float* c,
                                          const float* dh, float* dc, float* d_pre,
                                          std::int64_t j) {
  const std::int64_t u = d.units;
  const float d_o = fmul(dh[j], tc);
  const float d_cell =
      fadd(dc[j], fmul(fmul(dh[j], a.o), activation_derivative(d.activation, c[j], tc)));
  dc[j] = fmul(d_cell, a.f);
  d_pre[j] = fmul(fmul(d_cell, a.g), activation_derivative(d.recurrent_activation, pre[j], a.i));
  d_pre[u + j] =
      fmul(fmul(d_cell, c_prev[j]), activation_derivative(d.recurrent_activation, pre[u + j], a.f));
  d_pre[2 * u + j] =
      fmul(fmul(d_cell, a.i), activation_derivative(d.activation, pre[2 * u + j], a.g));
  d_pre[3 * u + j] = fmul(d_o, activation_derivative(d.recurrent_activation, pre[3 * u + j], a.o));
}

/// Its gradients for unit j, the gates computed again from `pre` (lstm_unit_gradients).
TANDEM_HD inline void lstm_unit_backward(const RecurrentCellDesc& d, const float* pre,
                                         const float* c_prev, const float* c, const float* dh,
                                         float* dc, float* d_pre, std::int64_t j) {
  lstm_unit_gradients(d, lstm_gates(d, pre, j), activation_value(d.activation, c[j]), pre, c_prev,
                      c, dh, dc, d_pre, j);
}

/// GRU unit j's gate pre-activations (z's, r's) and rec_h into pre, as the header says.
TANDEM_HD inline void gru_gate_inputs(const RecurrentCellDesc& d, const float* xw, const float* rec,
                                      float* pre, std::int64_t j) {
  const std::int64_t u = d.units;
  pre[j] = fadd(xw[j], rec[j]);
  pre[u + j] = fadd(xw[u + j], rec[u + j]);
  pre[3 * u + j] = rec[2 * u + j];
}

/// The candidate's pre-activation given the reset gate r: xw_h + r·rec_h (reset_before:
/// xw_h + rec_h), into pre.
TANDEM_HD inline float gru_candidate_input(const RecurrentCellDesc& d, const float* xw, float r,
                                           float* pre, std::int64_t j) {
  const std::int64_t u = d.units;
  const float rec_h = pre[3 * u + j];
  const float ph = fadd(xw[2 * u + j], d.reset_before ? rec_h : fmul(r, rec_h));
  pre[2 * u + j] = ph;
  return ph;
}

/// h = z·h_prev + (1 − z)·hh.
TANDEM_HD inline float gru_output(float z, float h_prev, float hh) {
  return fadd(fmul(z, h_prev), fmul(fsub(1.0f, z), hh));
}

/// GRU unit j (reset_after): z = ra(xw_z + rec_z), r = ra(xw_r + rec_r), hh = a(xw_h + r·rec_h),
/// h = z·h_prev + (1 − z)·hh, Keras' formula (reset_before: hh = a(xw_h + rec_h)); pre (4 units)
/// as the header says.
TANDEM_HD inline void gru_unit_forward(const RecurrentCellDesc& d, const float* xw,
                                       const float* rec, const float* h_prev, float* pre, float* h,
                                       std::int64_t j) {
  const std::int64_t u = d.units;
  gru_gate_inputs(d, xw, rec, pre, j);
  const float z = activation_value(d.recurrent_activation, pre[j]);
  const float r = activation_value(d.recurrent_activation, pre[u + j]);
  const float hh = activation_value(d.activation, gru_candidate_input(d, xw, r, pre, j));
  h[j] = gru_output(z, h_prev[j], hh);
}

/// The gradients of unit j given its z, r and hh (as the forward computed them) and dh = dL/dh
/// of the step: d_xw and d_rec (3 units each) = dL/dxw and dL/drec, and dh_prev = the part of
/// dL/dh_prev that bypasses the recurrent kernel (dh·z; the caller adds d_rec·recurrent_kernelᵀ).
/// reset_before: d_rec's h unit is dL/d(rec_h) and the r units of d_xw and d_rec are 0, for the
/// caller (nn/gru_reset_before).
TANDEM_HD inline void gru_unit_gradients(const RecurrentCellDesc& d, float z, float r, float hh,
                                         const float* pre, const float* h_prev, const float* dh,
                                         float* d_xw, float* d_rec, float* dh_prev,
                                         std::int64_t j) {
  const std::int64_t u = d.units;
  const float pz = pre[j], pr = pre[u + j], ph = pre[2 * u + j], rec_h = pre[3 * u + j];
  const float dz = fmul(dh[j], fsub(h_prev[j], hh));
  const float d_ph = fmul(fmul(dh[j], fsub(1.0f, z)), activation_derivative(d.activation, ph, hh));
  const float d_pr = d.reset_before ? 0.0f
                                    : fmul(fmul(d_ph, rec_h),
                                           activation_derivative(d.recurrent_activation, pr, r));
  const float d_pz = fmul(dz, activation_derivative(d.recurrent_activation, pz, z));
  d_xw[j] = d_pz;
  d_xw[u + j] = d_pr;
  d_xw[2 * u + j] = d_ph;
  d_rec[j] = d_pz;
  d_rec[u + j] = d_pr;
  d_rec[2 * u + j] = d.reset_before ? d_ph : fmul(d_ph, r);
  dh_prev[j] = fmul(dh[j], z);
}

/// Its gradients for unit j, z, r and hh computed again from `pre` (gru_unit_gradients).
TANDEM_HD inline void gru_unit_backward(const RecurrentCellDesc& d, const float* pre,
                                        const float* h_prev, const float* dh, float* d_xw,
                                        float* d_rec, float* dh_prev, std::int64_t j) {
  const std::int64_t u = d.units;
  gru_unit_gradients(d, activation_value(d.recurrent_activation, pre[j]),
                     activation_value(d.recurrent_activation, pre[u + j]),
                     activation_value(d.activation, pre[2 * u + j]), pre, h_prev, dh, d_xw, d_rec,
                     dh_prev, j);
}

/// Whether any of a row's `n` values differs from `value` (a NaN differs): the row is a step a
/// sequence mask keeps.
TANDEM_HD inline bool row_differs(const float* row, std::int64_t n, float value) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!(row[i] == value)) return true;
  return false;
}

/// The mean of channel c over the steps a mask keeps, for one sample (x: steps × channels, mask:
/// steps values), both sums in step order: Σ mask·x / Σ mask, Keras' masked
/// GlobalAveragePooling1D (NaN where no step is kept, as Keras' 0/0).
TANDEM_HD inline float masked_step_mean(const float* x, const float* mask, std::int64_t steps,
                                        std::int64_t channels, std::int64_t c) {
  float sum = 0.0f, kept = 0.0f;
  for (std::int64_t t = 0; t < steps; ++t) {
    sum = fadd(sum, fmul(x[t * channels + c], mask[t]));
    kept = fadd(kept, mask[t]);
  }
  return fdiv(sum, kept);
}

/// The steps a sample's mask keeps, summed in step order (masked_step_mean's denominator).
TANDEM_HD inline float masked_step_count(const float* mask, std::int64_t steps) {
  float kept = 0.0f;
  for (std::int64_t t = 0; t < steps; ++t) kept = fadd(kept, mask[t]);
  return kept;
}

/// masked_step_mean's gradient for a step whose mask value is `m`: dy · m / kept, `kept` the
/// sample's masked_step_count.
TANDEM_HD inline float masked_step_mean_gradient(float dy, float m, float kept) {
  return fdiv(fmul(dy, m), kept);
}

}  // namespace math

}  // namespace tandem::backend
