#include "nn/batch_normalization.hpp"

#include <algorithm>
#include <cmath>

#include "backend/cpu/parallel.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

// Values per reduction block: the split depends on the shape only, never on the thread count.
constexpr std::int64_t kBlockValues = 1 << 15;

// out[j] = sum over rows of the per-row terms that accumulate(r0, r1, acc) adds into
// acc[0, width) for rows [r0, r1). Blocks of rows are summed in parallel into their own partial
// sums, which are then added in block order: bitwise deterministic.
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

std::int64_t rows_per_chunk(std::int64_t channels) {
  return std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(channels, 1));
}

}  // namespace

BatchNormalization::BatchNormalization(std::string name, BatchNormalizationOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  gamma_.name = "gamma";
  beta_.name = "beta";
  moving_mean_.name = "moving_mean";
  moving_mean_.trainable = false;
  moving_variance_.name = "moving_variance";
  moving_variance_.trainable = false;
}

Shape BatchNormalization::build(const Shape& input_shape, Rng& init) {
  if (input_shape.empty())
    throw ShapeError("layer '" + name() +
                     "' (BatchNormalization) needs inputs with a channel axis, got " +
                     shape_to_string(input_shape, true));
  const auto last = static_cast<std::int64_t>(input_shape.size());
  if (options_.axis != -1 && options_.axis != last)
    throw ShapeError("layer '" + name() + "' (BatchNormalization): axis " +
                     std::to_string(options_.axis) + " of inputs " +
                     shape_to_string(input_shape, true) +
                     " is not the last axis; Tandem normalises the last axis only "
                     "(channels_last, axis=-1)");
  input_shape_ = input_shape;
  channels_ = input_shape.back();
  const std::int64_t c = channels_;
  // Keras creates (and draws) the weights in this order.
  if (options_.scale) {
    gamma_.value = Tensor({c});
    gamma_.grad = Tensor({c});
    options_.gamma_initializer.fill(gamma_.value, c, c, init);
  }
  if (options_.center) {
    beta_.value = Tensor({c});
    beta_.grad = Tensor({c});
    options_.beta_initializer.fill(beta_.value, c, c, init);
  }
  moving_mean_.value = Tensor({c});
  options_.moving_mean_initializer.fill(moving_mean_.value, c, c, init);
  moving_variance_.value = Tensor({c});
  options_.moving_variance_initializer.fill(moving_variance_.value, c, c, init);
  shift_.assign(static_cast<std::size_t>(c), 0.0f);
  inv_std_.assign(static_cast<std::size_t>(c), 0.0f);
  return input_shape;
}

const Tensor& BatchNormalization::forward(const Tensor& x, bool training) {
  if (x.rank() != static_cast<int>(input_shape_.size()) + 1 ||
      !std::equal(input_shape_.begin(), input_shape_.end(), x.shape().begin() + 1))
    throw ShapeError("layer '" + name() + "' (BatchNormalization) expects inputs " +
                     shape_to_string(input_shape_, true) + ", got " + shape_to_string(x.shape()));
  input_ = x;
  output_.resize(x.shape());
  const std::int64_t channels = channels_;
  const std::int64_t rows = x.size() / channels;
  const float* xp = x.data();
  // Keras 3: `training and self.trainable` uses the batch statistics; otherwise the moving ones.
  batch_stats_ = training && trainable();
  if (batch_stats_) {
    // Synchronized: every replica of every rank takes part in both sums, an empty shard too.
    const bool global = cross_replica_ != nullptr;
    if (rows == 0 && !global) return output_;  // an empty shard: no statistics
    double count = static_cast<double>(rows);
    row_sums(rows, channels, partial_, sums_, [&](std::int64_t r0, std::int64_t r1, double* acc) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const float* xr = xp + r * channels;
        for (std::int64_t c = 0; c < channels; ++c) acc[c] += xr[c];
      }
    });
    if (global) {
      global_.assign(sums_.begin(), sums_.begin() + channels);
      global_.push_back(count);
      cross_replica_->sum(replica_, global_.data(), global_.size());
      std::copy(global_.begin(), global_.begin() + channels, sums_.begin());
      count = global_.back();
    }
    std::vector<double> mean(sums_.begin(), sums_.begin() + channels);
    for (double& m : mean) m /= count;
    // Two passes: the variance from squared deviations, not E[x²] - E[x]² (no cancellation).
    row_sums(rows, channels, partial_, sums_, [&](std::int64_t r0, std::int64_t r1, double* acc) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const float* xr = xp + r * channels;
        for (std::int64_t c = 0; c < channels; ++c) {
          const double d = xr[c] - mean[c];
          acc[c] += d * d;
        }
      }
    });
    if (global) {
      global_.assign(sums_.begin(), sums_.begin() + channels);
      cross_replica_->sum(replica_, global_.data(), global_.size());
      std::copy(global_.begin(), global_.end(), sums_.begin());
    }
    if (rows == 0) return output_;
    const double momentum = options_.momentum;
    float* mm = moving_mean_.value.data();
    float* mv = moving_variance_.value.data();
    for (std::int64_t c = 0; c < channels; ++c) {
      const double var = sums_[c] / count;  // biased, as Keras
      shift_[c] = static_cast<float>(mean[c]);
      inv_std_[c] = static_cast<float>(1.0 / std::sqrt(var + options_.epsilon));
      mm[c] = static_cast<float>(mm[c] * momentum + mean[c] * (1.0 - momentum));
      mv[c] = static_cast<float>(mv[c] * momentum + var * (1.0 - momentum));
    }
  } else {
    const float* mm = moving_mean_.value.data();
    const float* mv = moving_variance_.value.data();
    for (std::int64_t c = 0; c < channels; ++c) {
      shift_[c] = mm[c];
      inv_std_[c] =
          static_cast<float>(1.0 / std::sqrt(static_cast<double>(mv[c]) + options_.epsilon));
    }
  }
  // y = (x - shift) * (gamma * inv_std) + beta
  std::vector<float> a(static_cast<std::size_t>(channels)),
      b(static_cast<std::size_t>(channels), 0.0f);
  for (std::int64_t c = 0; c < channels; ++c) {
    a[c] = options_.scale ? gamma_.value[c] * inv_std_[c] : inv_std_[c];
    if (options_.center) b[c] = beta_.value[c];
  }
  float* y = output_.data();
  const float* shift = shift_.data();
  cpu::parallel_for(rows, rows_per_chunk(channels), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xr = xp + r * channels;
      float* yr = y + r * channels;
      for (std::int64_t c = 0; c < channels; ++c) yr[c] = (xr[c] - shift[c]) * a[c] + b[c];
    }
  });
  return output_;
}

const Tensor& BatchNormalization::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t channels = channels_;
  const std::int64_t rows = input_.size() / channels;
  if (grad_output.size() != input_.size())
    throw ShapeError("layer '" + name() + "' (BatchNormalization): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output " +
                     shape_to_string(input_.shape()));
  const float* g = grad_output.data();
  const float* xp = input_.data();
  const float* shift = shift_.data();
  const float* inv_std = inv_std_.data();
  // sums_[c] = sum of g, sums_[channels + c] = sum of g * x̂ with x̂ = (x - shift) * inv_std.
  row_sums(rows, 2 * channels, partial_, sums_, [&](std::int64_t r0, std::int64_t r1, double* acc) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* gr = g + r * channels;
      const float* xr = xp + r * channels;
      for (std::int64_t c = 0; c < channels; ++c) {
        acc[c] += gr[c];
        acc[channels + c] += static_cast<double>(gr[c]) * ((xr[c] - shift[c]) * inv_std[c]);
      }
    }
  });
  // gamma and beta get this shard's sums: the gradient all-reduce adds the other shards'.
  if (options_.scale)
    for (std::int64_t c = 0; c < channels; ++c)
      gamma_.grad[c] = static_cast<float>(sums_[channels + c]);
  if (options_.center)
    for (std::int64_t c = 0; c < channels; ++c) beta_.grad[c] = static_cast<float>(sums_[c]);
  // The input gradient goes through the statistics of the whole batch they came from.
  double count = static_cast<double>(rows);
  if (batch_stats_ && cross_replica_) {
    global_.assign(sums_.begin(), sums_.begin() + 2 * channels);
    global_.push_back(count);
    cross_replica_->sum(replica_, global_.data(), global_.size());
    count = global_.back();
  }
  const double* stat_sums = batch_stats_ && cross_replica_ ? global_.data() : sums_.data();
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  grad_input_.resize(input_.shape());
  // Batch statistics: dx = a * (g - mean(g) - x̂ * mean(g * x̂)), a = gamma * inv_std (the
  // gradient through the mean and the variance). Moving statistics: dx = a * g.
  std::vector<float> a(static_cast<std::size_t>(channels)), k1(a.size(), 0.0f), k2(a.size(), 0.0f);
  for (std::int64_t c = 0; c < channels; ++c) {
    a[c] = options_.scale ? gamma_.value[c] * inv_std[c] : inv_std[c];
    if (batch_stats_ && count > 0) {
      k1[c] = static_cast<float>(stat_sums[c] / count);
      k2[c] = static_cast<float>(stat_sums[channels + c] / count);
    }
  }
  float* dx = grad_input_.data();
  cpu::parallel_for(rows, rows_per_chunk(channels), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* gr = g + r * channels;
      const float* xr = xp + r * channels;
      float* dr = dx + r * channels;
      if (batch_stats_) {
        for (std::int64_t c = 0; c < channels; ++c)
          dr[c] = a[c] * (gr[c] - k1[c] - (xr[c] - shift[c]) * inv_std[c] * k2[c]);
      } else {
        for (std::int64_t c = 0; c < channels; ++c) dr[c] = a[c] * gr[c];
      }
    }
  });
  return grad_input_;
}

std::vector<Parameter*> BatchNormalization::parameters() {
  std::vector<Parameter*> out;
  if (options_.scale) out.push_back(&gamma_);
  if (options_.center) out.push_back(&beta_);
  out.push_back(&moving_mean_);
  out.push_back(&moving_variance_);
  return out;
}

nlohmann::json BatchNormalization::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"axis", options_.axis},
          {"momentum", options_.momentum},
          {"epsilon", options_.epsilon},
          {"center", options_.center},
          {"scale", options_.scale},
          {"beta_initializer", options_.beta_initializer.config()},
          {"gamma_initializer", options_.gamma_initializer.config()},
          {"moving_mean_initializer", options_.moving_mean_initializer.config()},
          {"moving_variance_initializer", options_.moving_variance_initializer.config()},
          {"beta_regularizer", nullptr},
          {"gamma_regularizer", nullptr},
          {"beta_constraint", nullptr},
          {"gamma_constraint", nullptr},
          {"synchronized", options_.synchronized}};
}

}  // namespace tandem::nn
