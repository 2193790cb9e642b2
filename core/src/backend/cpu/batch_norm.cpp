// The CPU backend's batch normalization: per-channel sums in double over blocks of rows summed
// in parallel, the blocks' partial sums then added in block order (bitwise deterministic). A
// shard's statistics take one pass over x (sums of the deviations from its first row and of their
// squares); synchronized ones two, summed across the replicas (the mean, then the squared
// deviations from it). With a Keras mask (`kept`) the sums skip the rows it leaves out. With
// output_relu the relu of the next layer is applied in the same passes: max(0, ·) as the output is
// written, and the incoming gradient masked (activation_backward's relu arithmetic) as it is read.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "backend/cpu/avx512_copy.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/parallel.hpp"
#include "backend/kernel_math.hpp"

namespace tandem::backend {

namespace {

// Values per reduction block: the split depends on the shape only, never on the thread count.
constexpr std::int64_t kBlockValues = 1 << 15;

// out[j] = sum over rows of the per-row terms that accumulate(r0, r1, acc) adds into
// acc[0, width) for rows [r0, r1).
template <class F>
void row_sums(std::int64_t rows, std::int64_t width, std::vector<double>& partial,
              std::vector<double>& out, F&& accumulate) {
  const std::int64_t block =
      std::max<std::int64_t>(1, kBlockValues / std::max<std::int64_t>(width, 1));
  const std::int64_t blocks = (rows + block - 1) / block;
  partial.assign(static_cast<std::size_t>(blocks * width), 0.0);
  cpu::parallel_for(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b)
      accumulate(b * block, std::min(rows, (b + 1) * block), partial.data() + b * width);
  });
  out.assign(static_cast<std::size_t>(width), 0.0);
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t j = 0; j < width; ++j) out[j] += partial[b * width + j];
}

// Channels whose sums one pass over a block keeps in registers.
constexpr std::int64_t kLanes = 16;

// For rows [r0, r1) of `channels` values: acc[c] += a and acc[channels + c] += b, where
// terms(i, c, a, b) gives the two terms of value i (= row * channels + c). The rows are summed
// kLanes channels at a time into local sums the compiler keeps in vector registers across the
// rows: added straight into acc, each row's sums waited on the previous row's store. The
// channels past the last full kLanes go one by one.
template <class F>
[[gnu::always_inline]] inline void paired_sums_of(std::int64_t r0, std::int64_t r1,
                                                  std::int64_t channels, double* acc, F&& terms) {
  std::int64_t c0 = 0;
  for (; c0 + kLanes <= channels; c0 += kLanes) {
    double first[kLanes] = {}, second[kLanes] = {};
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t i0 = r * channels + c0;
#pragma omp simd
      for (std::int64_t j = 0; j < kLanes; ++j) {
        double a, b;
        terms(i0 + j, c0 + j, a, b);
        first[j] += a;
        second[j] += b;
      }
    }
    for (std::int64_t j = 0; j < kLanes; ++j) {
      acc[c0 + j] += first[j];
      acc[channels + c0 + j] += second[j];
    }
  }
  for (; c0 < channels; ++c0) {
    double first = 0, second = 0;
    for (std::int64_t r = r0; r < r1; ++r) {
      double a, b;
      terms(r * channels + c0, c0, a, b);
      first += a;
      second += b;
    }
    acc[c0] += first;
    acc[channels + c0] += second;
  }
}

// paired_sums_of in the copy this CPU can take (AVX-512 keeps the 16 lanes of each sum in one
// register pair; the baseline's SSE2 spills them).
template <class F>
void paired_sums(std::int64_t r0, std::int64_t r1, std::int64_t channels, double* acc,
                 const F& terms) {
  cpu::run_loop<&paired_sums_of<const F&>>(r0, r1, channels, acc, std::cref(terms));
}

std::int64_t rows_per_chunk(std::int64_t channels) {
  return std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(channels, 1));
}

class CpuBatchNorm final : public BatchNorm {
 public:
  explicit CpuBatchNorm(const BatchNormDesc& desc)
      : d_(desc),
        shift_(static_cast<std::size_t>(desc.channels), 0.0f),
        inv_std_(static_cast<std::size_t>(desc.channels), 0.0f) {}

  void forward_training(const Tensor& x, const Tensor* gamma, const Tensor* beta,
                        Tensor& moving_mean, Tensor& moving_variance, Tensor& y,
                        const SumAcrossReplicas& sync, const Tensor* kept) override {
    const std::int64_t channels = d_.channels;
    const std::int64_t rows = x.size() / channels;
    batch_stats_ = true;
    kept_rows_ = kept ? kept_rows(kept->data(), rows) : static_cast<double>(rows);
    if (rows == 0 && !sync) return;  // an empty shard: no statistics
    // Synchronized, an empty shard takes part in the sums and takes the whole batch's
    // statistics into its moving ones as every replica does (else it validates with stale ones).
    if (sync) {
      // No replica had rows (a pipeline's micro-batch past a short batch's end): no statistics.
      if (synchronized_statistics(x, sync, kept) == 0) return;
    } else if (kept) {
      masked_statistics(x, kept->data());
    } else {
      local_statistics(x);
    }
    const double momentum = d_.momentum;
    float* mm = moving_mean.data();
    float* mv = moving_variance.data();
    for (std::int64_t c = 0; c < channels; ++c) {
      shift_[c] = static_cast<float>(mean_[c]);
      inv_std_[c] = static_cast<float>(1.0 / std::sqrt(var_[c] + d_.epsilon));
      mm[c] = static_cast<float>(mm[c] * momentum + mean_[c] * (1.0 - momentum));
      mv[c] = static_cast<float>(mv[c] * momentum + var_[c] * (1.0 - momentum));
    }
    if (rows > 0) apply(x, gamma, beta, y);
  }

  void forward_inference(const Tensor& x, const Tensor* gamma, const Tensor* beta,
                         const Tensor& moving_mean, const Tensor& moving_variance,
                         Tensor& y) override {
    batch_stats_ = false;
    for (std::int64_t c = 0; c < d_.channels; ++c) {
      shift_[c] = moving_mean[c];
      inv_std_[c] = static_cast<float>(
          1.0 / std::sqrt(static_cast<double>(moving_variance[c]) + d_.epsilon));
    }
    apply(x, gamma, beta, y);
  }

  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* gamma,
                Tensor* d_gamma, Tensor* d_beta, Tensor* dx, const SumAcrossReplicas& sync,
                const Tensor* kept) override {
    const float* kept_rows = kept ? kept->data() : nullptr;
    if (d_.output_relu)
      backward_of<true>(x, y, dy, gamma, d_gamma, d_beta, dx, sync, kept_rows);
    else
      backward_of<false>(x, y, dy, gamma, d_gamma, d_beta, dx, sync, kept_rows);
  }

  std::int64_t counted_rows() override { return static_cast<std::int64_t>(kept_rows_); }

 private:
  // How many of `rows` rows a mask keeps (its non-zero values).
  static double kept_rows(const float* kept, std::int64_t rows) {
    std::int64_t count = 0;
    for (std::int64_t r = 0; r < rows; ++r) count += kept[r] != 0.0f;
    return static_cast<double>(count);
  }

  // The mean and biased variance of the rows a mask keeps (kept_rows_ of them), shifted by the
  // first row as local_statistics; none kept: 0 and 0, as Keras' masked moments give (its
  // Σ mask·x / (Σ mask + ε) with ε = 1e-7, which from two kept rows on is below float32's
  // resolution and is not added here).
  void masked_statistics(const Tensor& x, const float* kept) {
    const std::int64_t channels = d_.channels;
    const std::int64_t rows = x.size() / channels;
    const float* xp = x.data();
    const float* first = xp;
    row_sums(rows, 2 * channels, partial_, sums_,
             [&](std::int64_t r0, std::int64_t r1, double* acc) {
               for (std::int64_t r = r0; r < r1; ++r) {
                 if (kept[r] == 0.0f) continue;
                 const float* xr = xp + r * channels;
                 for (std::int64_t c = 0; c < channels; ++c) {
                   const double d = static_cast<double>(xr[c]) - first[c];
                   acc[c] += d;
                   acc[channels + c] += d * d;
                 }
               }
             });
    shifted_moments(first, kept_rows_);
  }

  // mean_ and var_ from sums_, the sums of d and of d² (d = x - first) over `count` rows; no
  // rows: 0 and 0.
  void shifted_moments(const float* first, double count) {
    const std::int64_t channels = d_.channels;
    mean_.assign(static_cast<std::size_t>(channels), 0.0);
    var_.assign(mean_.size(), 0.0);
    if (count == 0) return;
    for (std::int64_t c = 0; c < channels; ++c) {
      const double m = sums_[c] / count;
      mean_[c] = first[c] + m;
      var_[c] = std::max(sums_[channels + c] / count - m * m, 0.0);
    }
  }

  // This shard's mean and biased variance (into mean_, var_) in one pass: the sums of d and d²
  // for d = x - x[row 0] in double. Shifted by a value of the data, E[d²] - E[d]² loses at most
  // log10(largest squared z-score) of double's sixteen digits, whatever the data's offset.
  // (rows > 0.)
  void local_statistics(const Tensor& x) {
    const std::int64_t channels = d_.channels;
    const std::int64_t rows = x.size() / channels;
    const float* xp = x.data();
    const float* first = xp;
    row_sums(rows, 2 * channels, partial_, sums_,
             [&](std::int64_t r0, std::int64_t r1, double* acc) {
               paired_sums(r0, r1, channels, acc,
                           [&](std::int64_t i, std::int64_t c, double& sum, double& square) {
                             sum = static_cast<double>(xp[i]) - first[c];
                             square = sum * sum;
                           });
             });
    shifted_moments(first, static_cast<double>(rows));
  }

  // The global batch's mean and biased variance over every replica (into mean_, var_): two passes,
  // each summed across the replicas (the mean, then the squared deviations from it), so every
  // replica normalises with the same numbers; with `kept`, over the rows it keeps (none kept: 0
  // and 0, as masked_statistics). Every participant calls, an empty shard too. Returns the rows
  // of every replica together.
  double synchronized_statistics(const Tensor& x, const SumAcrossReplicas& sync,
                                 const Tensor* kept) {
    const std::int64_t channels = d_.channels;
    const std::int64_t rows = x.size() / channels;
    const float* xp = x.data();
    const float* kp = kept ? kept->data() : nullptr;
    row_sums(rows, channels, partial_, sums_, [&](std::int64_t r0, std::int64_t r1, double* acc) {
      for (std::int64_t r = r0; r < r1; ++r) {
        if (kp && kp[r] == 0.0f) continue;
        const float* xr = xp + r * channels;
        for (std::int64_t c = 0; c < channels; ++c) acc[c] += xr[c];
      }
    });
    global_.assign(sums_.begin(), sums_.begin() + channels);
    global_.push_back(kept_rows_);
    global_.push_back(static_cast<double>(rows));
    sync(global_.data(), global_.size());
    const double all_rows = global_.back();
    const double count = global_[static_cast<std::size_t>(channels)];
    mean_.assign(global_.begin(), global_.begin() + channels);
    var_.assign(mean_.size(), 0.0);
    if (count == 0) {
      std::fill(mean_.begin(), mean_.end(), 0.0);
      // Every participant still takes part in the second sum below, so none waits for another.
    } else {
      for (double& m : mean_) m /= count;
    }
    row_sums(rows, channels, partial_, sums_, [&](std::int64_t r0, std::int64_t r1, double* acc) {
      for (std::int64_t r = r0; r < r1; ++r) {
        if (kp && kp[r] == 0.0f) continue;
        const float* xr = xp + r * channels;
        for (std::int64_t c = 0; c < channels; ++c) {
          const double dev = xr[c] - mean_[c];
          acc[c] += dev * dev;
        }
      }
    });
    global_.assign(sums_.begin(), sums_.begin() + channels);
    sync(global_.data(), global_.size());
    if (count > 0) {
      var_.assign(global_.begin(), global_.end());
      for (double& v : var_) v /= count;  // biased, as Keras
    }
    return all_rows;
  }

  // The gradient that reaches the normalization: dy, or with output_relu dy masked by y > 0.
  template <bool kRelu>
  [[gnu::always_inline]] static inline float incoming(const float* dy, const float* y,
                                                      std::int64_t i) {
    if constexpr (kRelu)
      return math::activation_grad(ActivationKind::relu, y[i], y[i], dy[i]);
    else
      return dy[i];
  }

  template <bool kRelu>
  void backward_of(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* gamma,
                   Tensor* d_gamma, Tensor* d_beta, Tensor* dx, const SumAcrossReplicas& sync,
                   const float* kept) {
    const std::int64_t channels = d_.channels;
    const std::int64_t rows = x.size() / channels;
    const float* g = dy.data();
    const float* yp = kRelu ? y.data() : nullptr;
    const float* xp = x.data();
    const float* shift = shift_.data();
    const float* inv_std = inv_std_.data();
    // sums_[c] = sum of g, sums_[channels + c] = sum of g * x̂ with x̂ = (x - shift) * inv_std.
    row_sums(rows, 2 * channels, partial_, sums_,
             [&](std::int64_t r0, std::int64_t r1, double* acc) {
               paired_sums(r0, r1, channels, acc,
                           [&](std::int64_t i, std::int64_t c, double& sum, double& scaled) {
                             const float gc = incoming<kRelu>(g, yp, i);
                             sum = gc;
                             scaled = static_cast<double>(gc) * ((xp[i] - shift[c]) * inv_std[c]);
                           });
             });
    // gamma and beta get this shard's sums: the gradient all-reduce adds the other shards'.
    if (d_gamma)
      for (std::int64_t c = 0; c < channels; ++c)
        (*d_gamma)[c] = static_cast<float>(sums_[channels + c]);
    if (d_beta)
      for (std::int64_t c = 0; c < channels; ++c) (*d_beta)[c] = static_cast<float>(sums_[c]);
    // The input gradient goes through the statistics of the whole batch they came from (the
    // rows a mask kept: they alone made the statistics).
    double count = kept ? kept_rows_ : static_cast<double>(rows);
    const bool global = batch_stats_ && static_cast<bool>(sync);
    if (global) {
      global_.assign(sums_.begin(), sums_.begin() + 2 * channels);
      global_.push_back(count);
      sync(global_.data(), global_.size());
      count = global_.back();
    }
    if (!dx) return;
    const double* stat_sums = global ? global_.data() : sums_.data();
    // Batch statistics: dx = a * (g - mean(g) - x̂ * mean(g * x̂)), a = gamma * inv_std (the
    // gradient through the mean and the variance; with a mask the means are over the kept rows —
    // sums over every row, whose outputs all read the statistics, divided by the kept count —
    // and only a kept row gets that part). Moving statistics: dx = a * g.
    std::vector<float> a(static_cast<std::size_t>(channels)), k1(a.size(), 0.0f),
        k2(a.size(), 0.0f);
    for (std::int64_t c = 0; c < channels; ++c) {
      a[c] = gamma ? (*gamma)[c] * inv_std[c] : inv_std[c];
      if (batch_stats_ && count > 0) {
        k1[c] = static_cast<float>(stat_sums[c] / count);
        k2[c] = static_cast<float>(stat_sums[channels + c] / count);
      }
    }
    const InputGradient terms{g,        yp,        xp,        shift, inv_std,
                              a.data(), k1.data(), k2.data(), kept,  channels};
    float* dxp = dx->data();
    cpu::parallel_for(rows, rows_per_chunk(channels), [&](std::int64_t r0, std::int64_t r1) {
      if (batch_stats_)
        cpu::run_loop<&input_gradient_rows<kRelu, true>>(&terms, r0, r1, dxp);
      else
        cpu::run_loop<&input_gradient_rows<kRelu, false>>(&terms, r0, r1, dxp);
    });
  }

  // What input_gradient_rows reads: per value g, y (with kRelu) and x; per channel a to k2; per
  // row kept (null: every row).
  struct InputGradient {
    const float *g, *y, *x, *shift, *inv_std, *a, *k1, *k2, *kept;
    std::int64_t channels;
  };

  // dx for rows [r0, r1) (backward_of's formula). Compiled for AVX-512 as well
  // (avx512_copy.hpp): the same operations on each value, so the same bits.
  template <bool kRelu, bool kBatchStats>
  [[gnu::always_inline]] static inline void input_gradient_rows(const InputGradient* t,
                                                                std::int64_t r0, std::int64_t r1,
                                                                float* dx) {
    const std::int64_t channels = t->channels;
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xr = t->x + r * channels;
      float* dr = dx + r * channels;
      if (kBatchStats && t->kept && t->kept[r] == 0.0f) {  // outside the statistics
        for (std::int64_t c = 0; c < channels; ++c)
          dr[c] = t->a[c] * incoming<kRelu>(t->g, t->y, r * channels + c);
        continue;
      }
      for (std::int64_t c = 0; c < channels; ++c) {
        const float gc = incoming<kRelu>(t->g, t->y, r * channels + c);
        dr[c] = kBatchStats
                    ? t->a[c] * (gc - t->k1[c] - (xr[c] - t->shift[c]) * t->inv_std[c] * t->k2[c])
                    : t->a[c] * gc;
      }
    }
  }

  // y = (x - shift) * (gamma * inv_std) + beta, and with output_relu max(0, that).
  void apply(const Tensor& x, const Tensor* gamma, const Tensor* beta, Tensor& y) {
    if (d_.output_relu)
      apply_of<true>(x, gamma, beta, y);
    else
      apply_of<false>(x, gamma, beta, y);
  }

  template <bool kRelu>
  void apply_of(const Tensor& x, const Tensor* gamma, const Tensor* beta, Tensor& y) {
    const std::int64_t channels = d_.channels;
    const std::int64_t rows = x.size() / channels;
    std::vector<float> a(static_cast<std::size_t>(channels)),
        b(static_cast<std::size_t>(channels), 0.0f);
    for (std::int64_t c = 0; c < channels; ++c) {
      a[c] = gamma ? (*gamma)[c] * inv_std_[c] : inv_std_[c];
      if (beta) b[c] = (*beta)[c];
    }
    const float* xp = x.data();
    float* yp = y.data();
    const float* shift = shift_.data();
    cpu::parallel_for(rows, rows_per_chunk(channels), [&](std::int64_t r0, std::int64_t r1) {
      cpu::run_loop<&apply_rows<kRelu>>(xp, shift, a.data(), b.data(), channels, r0, r1, yp);
    });
  }

  // y for rows [r0, r1) (apply's formula), compiled for AVX-512 as well.
  template <bool kRelu>
  [[gnu::always_inline]] static inline void apply_rows(const float* x, const float* shift,
                                                       const float* a, const float* b,
                                                       std::int64_t channels, std::int64_t r0,
                                                       std::int64_t r1, float* y) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * channels;
      float* yr = y + r * channels;
      for (std::int64_t c = 0; c < channels; ++c) {
        const float z = (xr[c] - shift[c]) * a[c] + b[c];
        yr[c] = kRelu ? math::activation_value(ActivationKind::relu, z) : z;
      }
    }
  }

  BatchNormDesc d_;
  bool batch_stats_ = false;  // the last forward used the batch's statistics
  double kept_rows_ = 0;      // the rows of this shard the last training forward's statistics read
  std::vector<float> shift_, inv_std_;
  std::vector<double> partial_, sums_, global_;
  std::vector<double> mean_, var_;  // the last training forward's statistics
};

}  // namespace

std::unique_ptr<BatchNorm> CpuBackend::batch_norm(const BatchNormDesc& desc) {
  return std::make_unique<CpuBatchNorm>(desc);
}

}  // namespace tandem::backend
