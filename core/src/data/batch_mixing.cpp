#include "data/batch_mixing.hpp"

#include <algorithm>
#include <cmath>

#include "tandem/error.hpp"
#include "tandem/rng.hpp"

namespace tandem {

namespace {

// Gamma(shape, 1) by Marsaglia and Tsang's method (shape < 1 through Gamma(shape + 1) U^(1/shape)).
double gamma_draw(Rng& rng, double shape) {
  if (shape < 1.0) {
    const double u = std::max(static_cast<double>(rng.uniform()), 1e-12);
    return gamma_draw(rng, shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double z = 0, v = 0;
    do {
      z = rng.normal();
      v = 1.0 + c * z;
    } while (v <= 0);
    v = v * v * v;
    const double u = std::max(static_cast<double>(rng.uniform()), 1e-12);
    if (std::log(u) < 0.5 * z * z + d - d * v + d * std::log(v)) return d * v;
  }
}

double beta_draw(Rng& rng, double alpha) {
  const double a = gamma_draw(rng, alpha), b = gamma_draw(rng, alpha);
  return a + b > 0 ? a / (a + b) : 0.5;
}

// The generator of one sample's draws, or (position -1) of the batch's.
Rng rng_for(const MixPlace& p, std::int64_t position) {
  std::uint64_t key = Rng::derive(p.seed, static_cast<std::uint64_t>(p.epoch));
  key = Rng::derive(key, static_cast<std::uint64_t>(p.batch));
  return Rng(Rng::derive(key, static_cast<std::uint64_t>(position + 1)));
}

struct Box {
  std::int64_t top = 0, left = 0, bottom = 0, right = 0;  // [top, bottom) x [left, right)
};

// CutMix's box for a sample whose l was drawn: (1 - l) of the area, centred at random, clipped.
Box cut_box(Rng& rng, double l, std::int64_t rows, std::int64_t cols) {
  const double ratio = std::sqrt(1.0 - l);
  const auto h = static_cast<std::int64_t>(static_cast<double>(rows) * ratio);
  const auto w = static_cast<std::int64_t>(static_cast<double>(cols) * ratio);
  const auto cy = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(rows)));
  const auto cx = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(cols)));
  return {
      std::clamp<std::int64_t>(cy - h / 2, 0, rows), std::clamp<std::int64_t>(cx - w / 2, 0, cols),
      std::clamp<std::int64_t>(cy + h / 2, 0, rows), std::clamp<std::int64_t>(cx + w / 2, 0, cols)};
}

}  // namespace

void check_mixable(const Dataset& d, const MixOptions& mix, const std::string& path) {
  if (mix.kind == MixOptions::Kind::none) return;
  const Shape y = d.y_shape();
  if (d.y_parts().size() != 1 || y.size() != 1)
    throw ConfigError(path,
                      "mixes the targets, so they must be one array of one value per class "
                      "(one-hot or soft targets, with categorical_crossentropy) or one 0/1 "
                      "value; " +
                          d.describe() + " has targets of shape " + shape_to_string(y, true) +
                          (y.empty() ? " (class indices: give one-hot targets, e.g. the images "
                                       "dataset's \"label_mode\": \"categorical\")"
                                     : ""));
  if (mix.kind == MixOptions::Kind::cutmix && (d.x_parts().size() != 1 || d.x_shape().size() < 2))
    throw ConfigError(path,
                      "pastes boxes of images: it needs samples of shape (rows, cols, ...), "
                      "but " +
                          d.describe() + " has " + shape_to_string(d.x_shape(), true));
}

std::int64_t mix_partner(const MixPlace& p, std::int64_t position) {
  if (p.global_size < 2) return position;
  // A cyclic shift of the global batch by a nonzero offset drawn per batch: every sample gets
  // another one, and each process finds its rows' partners without the others.
  Rng rng = rng_for(p, -1);
  const auto shift =
      1 + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(p.global_size - 1)));
  return (position + shift) % p.global_size;
}

void mix_rows(const MixOptions& mix, const MixPlace& place, const Shape& x_shape, std::int64_t rows,
              float* x, float* y, const float* partner_x, const float* partner_y,
              std::int64_t y_row) {
  const std::int64_t x_row = shape_size(x_shape);
  for (std::int64_t k = 0; k < rows; ++k) {
    Rng rng = rng_for(place, place.first_row + k);
    if (rng.uniform() >= mix.probability) continue;
    double l = beta_draw(rng, mix.alpha);
    float* xs = x + k * x_row;
    const float* xp = partner_x + k * x_row;
    if (mix.kind == MixOptions::Kind::mixup) {
      for (std::int64_t e = 0; e < x_row; ++e)
        xs[e] = static_cast<float>(l * xs[e] + (1.0 - l) * xp[e]);
    } else {
      const std::int64_t img_rows = x_shape[0], img_cols = x_shape[1];
      const std::int64_t cell = x_row / (img_rows * img_cols);
      const Box b = cut_box(rng, l, img_rows, img_cols);
      for (std::int64_t i = b.top; i < b.bottom; ++i)
        std::copy(xp + (i * img_cols + b.left) * cell, xp + (i * img_cols + b.right) * cell,
                  xs + (i * img_cols + b.left) * cell);
      // The targets weigh what is actually shown: the box's area after clipping.
      l = 1.0 - static_cast<double>((b.bottom - b.top) * (b.right - b.left)) /
                    static_cast<double>(img_rows * img_cols);
    }
    float* ys = y + k * y_row;
    const float* yp = partner_y + k * y_row;
    for (std::int64_t e = 0; e < y_row; ++e)
      ys[e] = static_cast<float>(l * ys[e] + (1.0 - l) * yp[e]);
  }
}

}  // namespace tandem
