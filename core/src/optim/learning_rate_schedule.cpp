#include "optim/learning_rate_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "tandem/error.hpp"
#include "util/config_object.hpp"

namespace tandem {

using nlohmann::json;

json LearningRateSchedule::keras_config() const {
  return {{"module", "keras.optimizers.schedules"},
          {"class_name", class_name()},
          {"config", config()},
          {"registered_name", nullptr}};
}

namespace {

constexpr double kMaxRate = 1e9;

// A required number of `c` in (lo, hi], or [lo, hi] unless `lo_open`.
double required(ConfigObject& c, const char* key, double lo, double hi, bool lo_open = true) {
  if (!c.has(key)) throw ConfigError(c.path_of(key), "required by this schedule");
  return c.number_in(key, 0, lo, hi, lo_open);
}

// ExponentialDecay, initial_learning_rate · decay_rate ^ p, and InverseTimeDecay,
// initial_learning_rate / (1 + decay_rate · p): p = step / decay_steps, floored with staircase.
class DecayOverSteps final : public LearningRateSchedule {
 public:
  enum class Kind { exponential, inverse_time };
  DecayOverSteps(ConfigObject& c, Kind kind)
      : kind_(kind),
        initial_(required(c, "initial_learning_rate", 0, kMaxRate)),
        steps_(c.positive_int("decay_steps")),
        rate_(required(c, "decay_rate", 0, kMaxRate, kind == Kind::exponential)),
        staircase_(c.get_bool("staircase", false)) {}
  double at(std::int64_t step) const override {
    double p = static_cast<double>(step) / static_cast<double>(steps_);
    if (staircase_) p = std::floor(p);
    return kind_ == Kind::exponential ? initial_ * std::pow(rate_, p)
                                      : initial_ / (1.0 + rate_ * p);
  }
  std::string class_name() const override {
    return kind_ == Kind::exponential ? "ExponentialDecay" : "InverseTimeDecay";
  }

 protected:
  json config() const override {
    return {{"initial_learning_rate", initial_},
            {"decay_steps", steps_},
            {"decay_rate", rate_},
            {"staircase", staircase_},
            {"name", class_name()}};
  }

 private:
  Kind kind_;
  double initial_;
  std::int64_t steps_;
  double rate_;
  bool staircase_;
};

// values[i] while step <= boundaries[i] (and above the one before), values.back() past the last.
class PiecewiseConstantDecay final : public LearningRateSchedule {
 public:
  explicit PiecewiseConstantDecay(ConfigObject& c) {
    const json& b = c.at("boundaries");
    const json& v = c.at("values");
    if (!b.is_array() || b.empty())
      throw ConfigError(c.path_of("boundaries"), "expected a non-empty list of step counts");
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (!b[i].is_number() || !std::isfinite(b[i].get<double>()) ||
          (i > 0 && b[i].get<double>() <= boundaries_.back()))
        throw ConfigError(c.path_of("boundaries") + "[" + std::to_string(i) + "]",
                          "expected step counts in increasing order, got " + b.dump());
      boundaries_.push_back(b[i].get<double>());
    }
    if (!v.is_array() || v.size() != b.size() + 1)
      throw ConfigError(c.path_of("values"), "expected " + std::to_string(b.size() + 1) +
                                                 " rates (one more than the boundaries), got " +
                                                 v.dump());
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number() || !(v[i].get<double>() > 0) || v[i].get<double>() > kMaxRate)
        throw ConfigError(c.path_of("values") + "[" + std::to_string(i) + "]",
                          "expected a rate > 0, got " + v[i].dump());
      values_.push_back(v[i].get<double>());
    }
  }
  double at(std::int64_t step) const override {
    const double s = static_cast<double>(step);
    for (std::size_t i = 0; i < boundaries_.size(); ++i)
      if (s <= boundaries_[i]) return values_[i];
    return values_.back();
  }
  std::string class_name() const override { return "PiecewiseConstantDecay"; }

 protected:
  json config() const override {
    return {{"boundaries", boundaries_}, {"values", values_}, {"name", "PiecewiseConstant"}};
  }

 private:
  std::vector<double> boundaries_, values_;
};

// (initial - end) · (1 - step / decay_steps) ^ power + end, step held at decay_steps; with
// cycle, decay_steps grows to the next multiple of itself past the step instead.
class PolynomialDecay final : public LearningRateSchedule {
 public:
  explicit PolynomialDecay(ConfigObject& c)
      : initial_(required(c, "initial_learning_rate", 0, kMaxRate)),
        steps_(c.positive_int("decay_steps")),
        end_(c.number_in("end_learning_rate", 1e-4, 0, kMaxRate)),
        power_(c.number_in("power", 1.0, 0, 1e3)),
        cycle_(c.get_bool("cycle", false)) {}
  double at(std::int64_t step) const override {
    double s = static_cast<double>(step), steps = static_cast<double>(steps_);
    if (cycle_)
      steps *= step == 0 ? 1.0 : std::ceil(s / steps);
    else
      s = std::min(s, steps);
    return (initial_ - end_) * std::pow(1.0 - s / steps, power_) + end_;
  }
  std::string class_name() const override { return "PolynomialDecay"; }

 protected:
  json config() const override {
    return {{"initial_learning_rate", initial_},
            {"decay_steps", steps_},
            {"end_learning_rate", end_},
            {"power", power_},
            {"cycle", cycle_},
            {"name", "PolynomialDecay"}};
  }

 private:
  double initial_;
  std::int64_t steps_;
  double end_, power_;
  bool cycle_;
};

// Keras 3's cosine decay from `from` over decay_steps to alpha · from.
double cosine_decay(double step, double decay_steps, double from, double alpha) {
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * step / decay_steps));
  return from * ((1.0 - alpha) * cosine + alpha);
}

// Without warmup_target: cosine_decay of min(step, decay_steps) from initial_learning_rate.
// With it: a linear ramp from initial_learning_rate to warmup_target over warmup_steps, then
// the cosine decay from warmup_target over decay_steps.
class CosineDecay final : public LearningRateSchedule {
 public:
  explicit CosineDecay(ConfigObject& c)
      : initial_(required(c, "initial_learning_rate", 0, kMaxRate, false)),
        steps_(c.positive_int("decay_steps")),
        alpha_(c.number_in("alpha", 0.0, 0.0, 1.0)),
        warmup_steps_(c.int_in("warmup_steps", 0, 0, INT64_MAX)) {
    if (const json* target = c.find("warmup_target")) {
      if (!target->is_number() || !(target->get<double>() > 0) || target->get<double>() > kMaxRate)
        throw ConfigError(c.path_of("warmup_target"),
                          "expected a rate > 0 or null, got " + target->dump());
      warmup_target_ = target->get<double>();
    } else {
      c.ignore({"warmup_target"});
      if (!(initial_ > 0))
        throw ConfigError(c.path_of("initial_learning_rate"),
                          "expected a rate > 0 (0 is only the start of a warm-up)");
    }
  }
  double at(std::int64_t step) const override {
    const double steps = static_cast<double>(steps_), s = static_cast<double>(step);
    if (warmup_target_ <= 0) return cosine_decay(std::min(s, steps), steps, initial_, alpha_);
    const double warmup = static_cast<double>(warmup_steps_);
    const double g = std::min(s, steps + warmup);
    if (g < warmup) return (warmup_target_ - initial_) * g / warmup + initial_;
    return cosine_decay(g - warmup, steps, warmup_target_, alpha_);
  }
  std::string class_name() const override { return "CosineDecay"; }

 protected:
  json config() const override {
    return {{"initial_learning_rate", initial_},
            {"decay_steps", steps_},
            {"alpha", alpha_},
            {"warmup_target", warmup_target_ > 0 ? json(warmup_target_) : json(nullptr)},
            {"warmup_steps", warmup_steps_},
            {"name", "CosineDecay"}};
  }

 private:
  double initial_;
  std::int64_t steps_;
  double alpha_;
  std::int64_t warmup_steps_;
  double warmup_target_ = 0;  // 0: no warm-up
};

// SGDR: cosine decays restarted after first_decay_steps, each period t_mul times the one
// before and starting m_mul times as high.
class CosineDecayRestarts final : public LearningRateSchedule {
 public:
  explicit CosineDecayRestarts(ConfigObject& c)
      : initial_(required(c, "initial_learning_rate", 0, kMaxRate)),
        first_(c.positive_int("first_decay_steps")),
        t_mul_(c.number_in("t_mul", 2.0, 0.0, 1e3, true)),
        m_mul_(c.number_in("m_mul", 1.0, 0.0, 1e3)),
        alpha_(c.number_in("alpha", 0.0, 0.0, 1.0)) {}
  double at(std::int64_t step) const override {
    double fraction = static_cast<double>(step) / static_cast<double>(first_);
    double restart = 0;
    if (t_mul_ != 1.0) {
      restart = std::floor(std::log(1.0 - fraction * (1.0 - t_mul_)) / std::log(t_mul_));
      const double before = (1.0 - std::pow(t_mul_, restart)) / (1.0 - t_mul_);
      fraction = (fraction - before) / std::pow(t_mul_, restart);
    } else {
      restart = std::floor(fraction);
      fraction -= restart;
    }
    const double cosine =
        0.5 * std::pow(m_mul_, restart) * (1.0 + std::cos(std::numbers::pi * fraction));
    return initial_ * ((1.0 - alpha_) * cosine + alpha_);
  }
  std::string class_name() const override { return "CosineDecayRestarts"; }

 protected:
  json config() const override {
    return {{"initial_learning_rate", initial_},
            {"first_decay_steps", first_},
            {"t_mul", t_mul_},
            {"m_mul", m_mul_},
            {"alpha", alpha_},
            {"name", "SGDRDecay"}};
  }

 private:
  double initial_;
  std::int64_t first_;
  double t_mul_, m_mul_, alpha_;
};

template <class Schedule, class... Args>
std::shared_ptr<const LearningRateSchedule> read(ConfigObject& c, Args... args) {
  auto s = std::make_shared<Schedule>(c, args...);
  c.ignore({"name"});
  c.finish();
  return s;
}

}  // namespace

std::shared_ptr<const LearningRateSchedule> make_learning_rate_schedule(const json& value,
                                                                        const std::string& path) {
  ConfigObject outer(value, path);
  const std::string name = outer.get_string("class_name");
  outer.ignore({"module", "registered_name"});
  static const json kNoOptions = json::object();
  const json& options = outer.has("config") ? outer.at("config") : kNoOptions;  // c refers to it
  ConfigObject c(options, outer.path_of("config"));
  outer.finish();
  if (name == "ExponentialDecay") return read<DecayOverSteps>(c, DecayOverSteps::Kind::exponential);
  if (name == "InverseTimeDecay")
    return read<DecayOverSteps>(c, DecayOverSteps::Kind::inverse_time);
  if (name == "PiecewiseConstantDecay") return read<PiecewiseConstantDecay>(c);
  if (name == "PolynomialDecay") return read<PolynomialDecay>(c);
  if (name == "CosineDecay") return read<CosineDecay>(c);
  if (name == "CosineDecayRestarts") return read<CosineDecayRestarts>(c);
  throw ConfigError(outer.path_of("class_name"),
                    "unknown learning rate schedule '" + name +
                        "' (known: ExponentialDecay, PiecewiseConstantDecay, PolynomialDecay, "
                        "InverseTimeDecay, CosineDecay, CosineDecayRestarts)");
}

}  // namespace tandem
