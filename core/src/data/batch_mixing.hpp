// Mixup and CutMix: training batches whose samples are blended with a partner from the same
// global batch — mixup blends whole samples, x = l x_a + (1 - l) x_b; CutMix pastes a box of the
// partner's image over the sample's and weighs the targets by the areas — with l drawn from
// Beta(alpha, alpha) per sample (Zhang et al. 2018; Yun et al. 2019). Targets (and a sample's
// weight, when the data has one) are blended by the same l, so they must be one-hot or soft
// targets, not class indices.
//
// Every draw — the partner, l, the box — is keyed by (seed, epoch, batch, the sample's position
// in the global batch), so a batch is mixed the same whatever the device plan or the number of
// processes (each process reads its rows' partners itself), and a resumed run mixes as the
// uninterrupted one. Stateless functions; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "data/dataset.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

struct MixOptions {
  enum class Kind { none, mixup, cutmix };
  Kind kind = Kind::none;
  double alpha = 1.0;        // Beta(alpha, alpha)
  double probability = 1.0;  // a sample is mixed with this probability (else l = 1)
};

/// Throws ConfigError at `path` ("data.mixup", "data.cutmix") unless `dataset` can be mixed so:
/// targets of one array of one value per class or more (or a single 0/1 target), and for CutMix
/// images of at least two dimensions (rows, cols, ...).
void check_mixable(const Dataset& dataset, const MixOptions& mix, const std::string& path);

/// Where a batch sits: the epoch, the batch's index in it, the global batch's size and this
/// process's first row in it.
struct MixPlace {
  std::uint64_t seed = 0;
  int epoch = 0;
  std::int64_t batch = 0;
  std::int64_t global_size = 0;
  std::int64_t first_row = 0;
};

/// The global position (in [0, global_size)) whose sample row `position` is mixed with.
std::int64_t mix_partner(const MixPlace& place, std::int64_t position);

/// Mixes rows of x (x_row values each) and y (y_row values each) in place with `partner_x`,
/// `partner_y` (the partners' rows, in the same order), row k being global position
/// place.first_row + k. `image` is (rows, cols, channels) of a sample for CutMix.
void mix_rows(const MixOptions& mix, const MixPlace& place, const Shape& x_shape, std::int64_t rows,
              float* x, float* y, const float* partner_x, const float* partner_y,
              std::int64_t y_row);

}  // namespace tandem

TANDEM_INTERNAL_API_END
