// LearningRateSchedule: Keras' learning-rate schedules (keras.optimizers.schedules), given as an
// optimizer's `learning_rate`: ExponentialDecay, PiecewiseConstantDecay, PolynomialDecay,
// InverseTimeDecay, CosineDecay (with its warm-up) and CosineDecayRestarts, each computed by
// Keras 3's formula of the optimizer's step count. The update made after `step` updates uses
// at(step), as Keras' optimizer calls its schedule with `iterations` before counting the update.
//
// Immutable once made; any thread. Owned through shared_ptr by the optimizers that use it (the
// meta-model's replicas share one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  /// The rate of the update made after `step` (>= 0) updates.
  virtual double at(std::int64_t step) const = 0;
  /// "ExponentialDecay", ...
  virtual std::string class_name() const = 0;
  /// As Keras serializes it: {"module": "keras.optimizers.schedules", "class_name": ...,
  /// "config": {every option, defaults filled in}, "registered_name": null}.
  nlohmann::json keras_config() const;

 protected:
  virtual nlohmann::json config() const = 0;
};

/// Reads a Keras schedule ({"class_name": "ExponentialDecay", "config": {...}}, Keras 3's
/// "module"/"registered_name" accepted) found at `path`. Throws ConfigError naming the key of
/// anything missing, unknown or out of range.
std::shared_ptr<const LearningRateSchedule> make_learning_rate_schedule(const nlohmann::json& value,
                                                                        const std::string& path);

}  // namespace tandem

TANDEM_INTERNAL_API_END
