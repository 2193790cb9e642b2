// LossScale: Keras' LossScaleOptimizer — the loss multiplied by a scale before the backward
// pass, so that float16 gradients neither underflow nor lose their low bits, and the gradients
// divided by it again before the optimizer's update.
//
// Dynamic (the default, and Keras 3's only kind): the scale starts at `initial_scale` (2^15); a
// step whose gradients hold an Inf or NaN is skipped (weights, optimizer state and the optimizer's
// iterations stay as they were) and halves the scale; after `growth_steps` (2000) good steps in a
// row the scale doubles (up to kMaxLossScale). Fixed (Keras 2's `"dynamic": false`): the scale
// never changes and every step is applied — also Keras 3's `loss_scale_factor` on an optimizer
// (written back as that key, not as a wrapper: `factor`). With a power-of-two scale, scaling and
// unscaling are exact in binary floating point, so a float32 run trains to the same bits with or
// without it (unless values overflow or become subnormal).
//
// Plain data and arithmetic; one thread at a time (the optimizer's owner).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// The largest scale, 2^126: the gradients are unscaled by multiplying them by 1 / scale, which
/// must be a normal float (the backends flush subnormals to zero: 1 / 2^127 would zero every
/// gradient).
inline constexpr double kMaxLossScale = 0x1p126;

struct LossScaleConfig {
  double initial_scale = 32768.0;    // Keras' 2^15
  std::int64_t growth_steps = 2000;  // Keras' dynamic_growth_steps
  bool dynamic = true;
  bool factor = false;  // Keras 3's optimizer loss_scale_factor (fixed): no wrapper in configs
};

class LossScale {
 public:
  explicit LossScale(LossScaleConfig config);

  const LossScaleConfig& config() const { return config_; }
  /// The scale the next step's loss is multiplied by.
  double scale() const { return scale_; }
  /// Good steps since the scale last changed (Keras' step_counter).
  std::int64_t good_steps() const { return good_steps_; }
  /// Steps skipped for non-finite gradients since the run began.
  std::int64_t skipped_steps() const { return skipped_steps_; }

  /// Records one step whose unscaled gradients were all finite (or not) and moves the scale by
  /// the rules above. Returns whether the step is to be applied. Throws RunError when halving
  /// would take the scale below the smallest normal float (no scale makes the gradients finite:
  /// NaN in the data or the model), naming the skipped steps in a row.
  bool record(bool finite);

  /// {"scale", "good_steps", "skipped_steps"}: what a checkpoint keeps to resume exactly.
  nlohmann::json state() const;
  /// Restores state(); throws DataError naming `source` for a malformed one.
  void restore(const nlohmann::json& state, const std::string& source);

 private:
  LossScaleConfig config_;
  double scale_;
  std::int64_t good_steps_ = 0;
  std::int64_t skipped_steps_ = 0;
  std::int64_t skipped_in_a_row_ = 0;
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
