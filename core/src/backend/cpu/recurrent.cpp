// The CPU backend's recurrent steps: recurrent_math.hpp's per-unit functions over the rows of the
// batch, rows split by threads (each unit's arithmetic reads and writes its own row only); and
// the sequence masks recurrent layers read (a row's mask, a choice between rows).
//
// Keras' default LSTM and GRU cells (sigmoid gates, tanh) take their transcendental functions
// from oneDNN's vectorised eltwise over the whole step, as the Activation layers do (libm's
// scalar expf and tanhf took 44% of a ConvLSTM2D step); the arithmetic around them is
// recurrent_math.hpp's. Each element's value depends on that element alone, so a row gets the
// same bits whatever the rows and threads (contract 1).
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/eltwise.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

namespace {

// f(row, unit) for every unit of every row, rows split by threads.
template <class F>
void each_unit(std::int64_t rows, std::int64_t units, F f) {
  const std::int64_t min_rows = std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(units, 1));
  cpu::parallel_for(rows, min_rows, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t j = 0; j < units; ++j) f(r, j);
  });
}

// Whether the cell is Keras' default, whose functions oneDNN vectorises.
bool vectorised_cell(const RecurrentCellDesc& d) {
  return d.activation == ActivationKind::tanh && d.recurrent_activation == ActivationKind::sigmoid;
}

// The default cells' activated values for one step of `rows` rows: sigmoid of every
// pre-activation (LSTM's g units' and GRU's last two blocks unused), tanh of the third block
// (LSTM's g, GRU's candidate) and LSTM's tanh of the cell states. One set per thread, reused by
// every step.
struct CellActivations {
  std::vector<float> sigmoid, tanh_g, tanh_c;

  // Fills sigmoid from pre (rows × 4u, every unit's) and tanh_g from its third block of units
  // (LSTM's g, GRU's candidate).
  void gates(const float* pre, std::int64_t rows, std::int64_t u) {
    sigmoids(pre, rows, u);
    candidates(pre, rows, u);
  }
  // Fills sigmoid from pre (rows × 4u).
  void sigmoids(const float* pre, std::int64_t rows, std::int64_t u) {
    sigmoid.resize(static_cast<std::size_t>(rows * 4 * u));
    cpu::eltwise_forward(cpu::Eltwise::logistic, pre, sigmoid.data(), rows * 4 * u);
  }
  // Fills tanh_g from pre's third block of units.
  void candidates(const float* pre, std::int64_t rows, std::int64_t u) {
    tanh_g.resize(static_cast<std::size_t>(rows * u));
    float* g = tanh_g.data();
    cpu::parallel_for(rows, std::max<std::int64_t>(1, cpu::kMemoryBoundChunk / u),
                      [&](std::int64_t r0, std::int64_t r1) {
                        for (std::int64_t r = r0; r < r1; ++r)
                          std::copy_n(pre + r * 4 * u + 2 * u, u, g + r * u);
                      });
    cpu::eltwise_forward(cpu::Eltwise::tanh, g, g, rows * u);
  }
  math::LstmGates at(std::int64_t r, std::int64_t u, std::int64_t j) const {
    const float* s = sigmoid.data() + r * 4 * u;
    return {s[j], s[u + j], tanh_g[r * u + j], s[3 * u + j]};
  }
};

CellActivations& thread_activations() {
  thread_local CellActivations a;
  return a;
}

// The default cell's forward: pre = xw + rec, the gates by oneDNN, c per unit, tanh(c) by oneDNN
// into h, then h = o·tanh(c).
void lstm_forward_vectorised(const RecurrentCellDesc& d, std::int64_t rows, const Tensor& xw,
                             const Tensor& rec, const Tensor& c_prev, Tensor& pre, Tensor& c,
                             Tensor& h) {
  const std::int64_t u = d.units;
  float* p = pre.data();
  each_unit(rows, 4 * u, [&](std::int64_t r, std::int64_t k) {
    p[r * 4 * u + k] = math::fadd(xw.data()[r * 4 * u + k], rec.data()[r * 4 * u + k]);
  });
  CellActivations& a = thread_activations();
  a.gates(p, rows, u);
  each_unit(rows, u, [&](std::int64_t r, std::int64_t j) {
    c.data()[r * u + j] = math::lstm_cell(a.at(r, u, j), c_prev.data()[r * u + j]);
  });
  cpu::eltwise_forward(cpu::Eltwise::tanh, c.data(), h.data(), rows * u);
  each_unit(rows, u, [&](std::int64_t r, std::int64_t j) {
    h.data()[r * u + j] = math::fmul(a.at(r, u, j).o, h.data()[r * u + j]);
  });
}

// Its backward: the gates and tanh(c) again by oneDNN (the forward's very values), the gradients
// per unit.
void lstm_backward_vectorised(const RecurrentCellDesc& d, std::int64_t rows, const Tensor& pre,
                              const Tensor& c_prev, const Tensor& c, const Tensor& dh, Tensor& dc,
                              Tensor& d_pre) {
  const std::int64_t u = d.units;
  CellActivations& a = thread_activations();
  a.gates(pre.data(), rows, u);
  a.tanh_c.resize(static_cast<std::size_t>(rows * u));
  cpu::eltwise_forward(cpu::Eltwise::tanh, c.data(), a.tanh_c.data(), rows * u);
  each_unit(rows, u, [&](std::int64_t r, std::int64_t j) {
    math::lstm_unit_gradients(d, a.at(r, u, j), a.tanh_c[r * u + j], pre.data() + r * 4 * u,
                              c_prev.data() + r * u, c.data() + r * u, dh.data() + r * u,
                              dc.data() + r * u, d_pre.data() + r * 4 * u, j);
  });
}

// The default GRU cell's forward: z's and r's pre-activations, their sigmoids by oneDNN, the
// candidate's pre-activation per unit (it reads r), its tanh by oneDNN, then h per unit.
void gru_forward_vectorised(const RecurrentCellDesc& d, std::int64_t rows, const Tensor& xw,
                            const Tensor& rec, const Tensor& h_prev, Tensor& pre, Tensor& h) {
  const std::int64_t u = d.units;
  each_unit(rows, u, [&](std::int64_t r, std::int64_t j) {
    math::gru_gate_inputs(d, xw.data() + r * 3 * u, rec.data() + r * 3 * u, pre.data() + r * 4 * u,
                          j);
  });
  CellActivations& a = thread_activations();
  a.sigmoids(pre.data(), rows, u);
  each_unit(rows, u, [&](std::int64_t r, std::int64_t j) {
    math::gru_candidate_input(d, xw.data() + r * 3 * u, a.sigmoid[r * 4 * u + u + j],
                              pre.data() + r * 4 * u, j);
  });
  a.candidates(pre.data(), rows, u);
  each_unit(rows, u, [&](std::int64_t r, std::int64_t j) {
    h.data()[r * u + j] =
        math::gru_output(a.sigmoid[r * 4 * u + j], h_prev.data()[r * u + j], a.tanh_g[r * u + j]);
  });
}

// Its backward: z, r (the sigmoids of pre, which the forward wrote before r was read) and hh
// again by oneDNN, the gradients per unit.
void gru_backward_vectorised(const RecurrentCellDesc& d, std::int64_t rows, const Tensor& pre,
                             const Tensor& h_prev, const Tensor& dh, Tensor& d_xw, Tensor& d_rec,
                             Tensor& dh_prev) {
  const std::int64_t u = d.units;
  CellActivations& a = thread_activations();
  a.gates(pre.data(), rows, u);
  each_unit(rows, u, [&](std::int64_t r, std::int64_t j) {
    const float* s = a.sigmoid.data() + r * 4 * u;
    math::gru_unit_gradients(d, s[j], s[u + j], a.tanh_g[r * u + j], pre.data() + r * 4 * u,
                             h_prev.data() + r * u, dh.data() + r * u, d_xw.data() + r * 3 * u,
                             d_rec.data() + r * 3 * u, dh_prev.data() + r * u, j);
  });
}

}  // namespace

void CpuBackend::lstm_step_forward(const RecurrentCellDesc& d, const Tensor& xw, const Tensor& rec,
                                   const Tensor& c_prev, Tensor& pre, Tensor& c, Tensor& h) {
  require_device(*this, {&xw, &rec, &c_prev, &pre, &c, &h}, "lstm_step_forward");
  const std::int64_t rows = recurrent_rows(
      d, {{&xw, 4}, {&rec, 4}, {&pre, 4}, {&c_prev, 1}, {&c, 1}, {&h, 1}}, "lstm_step_forward");
  if (vectorised_cell(d)) return lstm_forward_vectorised(d, rows, xw, rec, c_prev, pre, c, h);
  const std::int64_t u = d.units;
  each_unit(rows, u, [&](std::int64_t r, std::int64_t j) {
    math::lstm_unit_forward(d, xw.data() + r * 4 * u, rec.data() + r * 4 * u, c_prev.data() + r * u,
                            pre.data() + r * 4 * u, c.data() + r * u, h.data() + r * u, j);
  });
}

void CpuBackend::lstm_step_backward(const RecurrentCellDesc& d, const Tensor& pre,
                                    const Tensor& c_prev, const Tensor& c, const Tensor& dh,
                                    Tensor& dc, Tensor& d_pre) {
  require_device(*this, {&pre, &c_prev, &c, &dh, &dc, &d_pre}, "lstm_step_backward");
  const std::int64_t rows = recurrent_rows(
      d, {{&pre, 4}, {&d_pre, 4}, {&c_prev, 1}, {&c, 1}, {&dh, 1}, {&dc, 1}}, "lstm_step_backward");
  if (vectorised_cell(d)) return lstm_backward_vectorised(d, rows, pre, c_prev, c, dh, dc, d_pre);
  const std::int64_t u = d.units;
  each_unit(rows, u, [&](std::int64_t r, std::int64_t j) {
    math::lstm_unit_backward(d, pre.data() + r * 4 * u, c_prev.data() + r * u, c.data() + r * u,
                             dh.data() + r * u, dc.data() + r * u, d_pre.data() + r * 4 * u, j);
  });
}

void CpuBackend::gru_step_forward(const RecurrentCellDesc& d, const Tensor& xw, const Tensor& rec,
                                  const Tensor& h_prev, Tensor& pre, Tensor& h) {
  require_device(*this, {&xw, &rec, &h_prev, &pre, &h}, "gru_step_forward");
  const std::int64_t rows = recurrent_rows(
      d, {{&xw, 3}, {&rec, 3}, {&pre, 4}, {&h_prev, 1}, {&h, 1}}, "gru_step_forward");
  if (vectorised_cell(d)) return gru_forward_vectorised(d, rows, xw, rec, h_prev, pre, h);
  const std::int64_t u = d.units;
  each_unit(rows, u, [&](std::int64_t r, std::int64_t j) {
    math::gru_unit_forward(d, xw.data() + r * 3 * u, rec.data() + r * 3 * u, h_prev.data() + r * u,
                           pre.data() + r * 4 * u, h.data() + r * u, j);
  });
}

void CpuBackend::gru_step_backward(const RecurrentCellDesc& d, const Tensor& pre,
                                   const Tensor& h_prev, const Tensor& dh, Tensor& d_xw,
                                   Tensor& d_rec, Tensor& dh_prev) {
  require_device(*this, {&pre, &h_prev, &dh, &d_xw, &d_rec, &dh_prev}, "gru_step_backward");
  const std::int64_t rows =
      recurrent_rows(d, {{&pre, 4}, {&d_xw, 3}, {&d_rec, 3}, {&h_prev, 1}, {&dh, 1}, {&dh_prev, 1}},
                     "gru_step_backward");
  if (vectorised_cell(d))
    return gru_backward_vectorised(d, rows, pre, h_prev, dh, d_xw, d_rec, dh_prev);
  const std::int64_t u = d.units;
  each_unit(rows, u, [&](std::int64_t r, std::int64_t j) {
    math::gru_unit_backward(d, pre.data() + r * 4 * u, h_prev.data() + r * u, dh.data() + r * u,
                            d_xw.data() + r * 3 * u, d_rec.data() + r * 3 * u,
                            dh_prev.data() + r * u, j);
  });
}

void CpuBackend::sequence_mask(const Tensor& x, float value, std::int64_t features, Tensor& mask) {
  require_device(*this, {&x, &mask}, "sequence_mask");
  check_sequence_mask(x, features, mask);
  const float* xp = x.data();
  float* m = mask.data();
  cpu::parallel_for(mask.size(), cpu::kMemoryBoundChunk / features,
                    [&](std::int64_t r0, std::int64_t r1) {
                      for (std::int64_t r = r0; r < r1; ++r)
                        m[r] = math::row_differs(xp + r * features, features, value) ? 1.0f : 0.0f;
                    });
}

void CpuBackend::select_rows(const Tensor& mask, const Tensor& a, const Tensor* b, Tensor& out,
                             std::int64_t cols) {
  require_device(*this, {&mask, &a, b, &out}, "select_rows");
  const std::int64_t rows = select_rows_count(mask, a, b, out, cols);
  const float* m = mask.data();
  const float* ap = a.data();
  const float* bp = b ? b->data() : nullptr;
  float* o = out.data();
  cpu::parallel_for(rows, std::max<std::int64_t>(1, cpu::kMemoryBoundChunk / cols),
                    [&](std::int64_t r0, std::int64_t r1) {
                      for (std::int64_t i = r0 * cols; i < r1 * cols; ++i)
                        o[i] = m[i / cols] != 0.0f ? ap[i] : bp ? bp[i] : 0.0f;
                    });
}

void CpuBackend::masked_average_steps(const Tensor& x, const Tensor& mask, Tensor& y,
                                      std::int64_t steps, std::int64_t channels) {
  require_device(*this, {&x, &mask, &y}, "masked_average_steps");
  const std::int64_t samples = masked_average_samples(x, mask, y, steps, channels);
  each_unit(samples, channels, [&](std::int64_t b, std::int64_t c) {
    y.data()[b * channels + c] = math::masked_step_mean(
        x.data() + b * steps * channels, mask.data() + b * steps, steps, channels, c);
  });
}

void CpuBackend::masked_average_steps_backward(const Tensor& dy, const Tensor& mask, Tensor& dx,
                                               std::int64_t steps, std::int64_t channels) {
  require_device(*this, {&dy, &mask, &dx}, "masked_average_steps_backward");
  const std::int64_t samples = masked_average_samples(dx, mask, dy, steps, channels);
  cpu::parallel_for(samples, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const float* m = mask.data() + b * steps;
      const float kept = math::masked_step_count(m, steps);
      for (std::int64_t t = 0; t < steps; ++t)
        for (std::int64_t c = 0; c < channels; ++c)
          dx.data()[(b * steps + t) * channels + c] =
              math::masked_step_mean_gradient(dy.data()[b * channels + c], m[t], kept);
    }
  });
}

}  // namespace tandem::backend
