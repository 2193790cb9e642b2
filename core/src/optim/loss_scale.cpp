#include "optim/loss_scale.hpp"

#include <cmath>
#include <limits>

#include "tandem/error.hpp"

namespace tandem {

LossScale::LossScale(LossScaleConfig config) : config_(config), scale_(config.initial_scale) {}

bool LossScale::record(bool finite) {
  if (!config_.dynamic) return true;
  if (finite) {
    skipped_in_a_row_ = 0;
    // Keras 3: the growth_steps-th good step in a row doubles the scale.
    if (good_steps_ >= config_.growth_steps - 1) {
      if (scale_ * 2.0 <= kMaxLossScale) scale_ *= 2.0;
      good_steps_ = 0;
    } else {
      ++good_steps_;
    }
    return true;
  }
  ++skipped_steps_;
  ++skipped_in_a_row_;
  good_steps_ = 0;
  const double halved = scale_ / 2.0;
  if (halved < static_cast<double>(std::numeric_limits<float>::min()))
    throw RunError("dynamic loss scaling: " + std::to_string(skipped_in_a_row_) +
                   " steps in a row had non-finite gradients, and the loss scale cannot fall "
                   "further (it would be " +
                   std::to_string(halved) +
                   "); the gradients are not finite at any scale — look for NaN or Inf in the "
                   "data or in the model's outputs");
  scale_ = halved;
  return false;
}

nlohmann::json LossScale::state() const {
  return {{"scale", scale_}, {"good_steps", good_steps_}, {"skipped_steps", skipped_steps_}};
}

void LossScale::restore(const nlohmann::json& state, const std::string& source) {
  const auto bad = [&](const std::string& what) {
    return DataError(source + ": the training state's loss_scale " + what);
  };
  if (!state.is_object())
    throw bad("is a JSON " + std::string(state.type_name()) + ", not an object");
  const auto number = [&](const char* key) -> const nlohmann::json& {
    if (!state.contains(key) || !state.at(key).is_number())
      throw bad("has no number '" + std::string(key) + "'");
    return state.at(key);
  };
  const double scale = number("scale").get<double>();
  if (!std::isfinite(scale) || scale < static_cast<double>(std::numeric_limits<float>::min()) ||
      scale > kMaxLossScale)
    throw bad("has scale " + number("scale").dump() +
              ", not a positive normal float of at most 2^126");
  const auto counter = [&](const char* key) {
    const nlohmann::json& v = number(key);
    if (!v.is_number_integer() || v.get<double>() < 0)
      throw bad("has " + std::string(key) + " " + v.dump() + ", not a count");
    return v.get<std::int64_t>();
  };
  const std::int64_t good = counter("good_steps");
  const std::int64_t skipped = counter("skipped_steps");
  if (good >= config_.growth_steps)
    throw bad("has good_steps " + std::to_string(good) + ", not below dynamic_growth_steps " +
              std::to_string(config_.growth_steps));
  scale_ = scale;
  good_steps_ = good;
  skipped_steps_ = skipped;
  skipped_in_a_row_ = 0;
}

}  // namespace tandem
