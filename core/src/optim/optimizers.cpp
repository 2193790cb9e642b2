// SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, Nadam and Lion with Keras 3 update rules
// and defaults.
#include <algorithm>
#include <limits>
#include <optional>

#include <spdlog/spdlog.h>

#include "backend/kernel_math.hpp"
#include "optim/loss_scale.hpp"
#include "optim/optimizer.hpp"
#include "optim/optimizer_catalog.hpp"
#include "tandem/error.hpp"
#include "util/config_object.hpp"

namespace tandem {

namespace {

using nlohmann::json;

// Every optimizer: what differs is data (the descriptor); the update is the
// backend's (backend/kernel_math.hpp's update_element on every device).
class KerasOptimizer : public Optimizer {
 public:
  KerasOptimizer(std::string cls, double learning_rate, const backend::OptimizerDesc& desc)
      : Optimizer(learning_rate, desc.weight_decay, desc.clipnorm, desc.clipvalue,
                  desc.global_clipnorm),
        cls_(std::move(cls)),
        desc_(desc) {}
  std::string class_name() const override { return cls_; }
  backend::OptimizerDesc desc() const override { return desc_; }

  json config() const override {
    json c = base_config(cls_);
    switch (desc_.kind) {
      case backend::OptimizerDesc::Kind::sgd:
        c["momentum"] = desc_.momentum;
        c["nesterov"] = desc_.nesterov;
        break;
      case backend::OptimizerDesc::Kind::adam:
        c["beta_1"] = desc_.beta_1;
        c["beta_2"] = desc_.beta_2;
        c["epsilon"] = desc_.epsilon;
        c["amsgrad"] = desc_.amsgrad;
        break;
      case backend::OptimizerDesc::Kind::rmsprop:
        c["rho"] = desc_.rho;
        c["momentum"] = desc_.momentum;
        c["epsilon"] = desc_.epsilon;
        c["centered"] = desc_.centered;
        break;
      case backend::OptimizerDesc::Kind::adagrad:
        c["initial_accumulator_value"] = desc_.initial_accumulator_value;
        c["epsilon"] = desc_.epsilon;
        break;
      case backend::OptimizerDesc::Kind::adadelta:
        c["rho"] = desc_.rho;
        c["epsilon"] = desc_.epsilon;
        break;
      case backend::OptimizerDesc::Kind::adamax:
      case backend::OptimizerDesc::Kind::nadam:
        c["beta_1"] = desc_.beta_1;
        c["beta_2"] = desc_.beta_2;
        c["epsilon"] = desc_.epsilon;
        if (desc_.kind == backend::OptimizerDesc::Kind::nadam && desc_.nadam_schedule_decay != 1.0)
          c["decay"] = desc_.nadam_schedule_decay;  // read back as Keras 2's legacy Nadam
        break;
      case backend::OptimizerDesc::Kind::lion:
        c["beta_1"] = desc_.beta_1;
        c["beta_2"] = desc_.beta_2;
        break;
    }
    c["use_ema"] = desc_.use_ema;
    c["ema_momentum"] = desc_.ema_momentum;
    c["ema_overwrite_frequency"] =
        desc_.ema_overwrite_frequency > 0 ? json(desc_.ema_overwrite_frequency) : json(nullptr);
    if (desc_.ema_keras2) c["is_legacy_optimizer"] = false;  // as tf.keras 2 writes it
    // Keras 3's own keys only where they are on: tf.keras 2 refuses an optimizer config that
    // names them (a Tandem checkpoint's training_config must load there too).
    if (const LossScale* scale = loss_scale(); scale && scale->config().factor)
      c["loss_scale_factor"] = scale->config().initial_scale;
    if (desc_.gradient_accumulation_steps > 1)
      c["gradient_accumulation_steps"] = desc_.gradient_accumulation_steps;
    return c;
  }

  float slot_initial_value(std::size_t slot) const override {
    return desc_.kind == backend::OptimizerDesc::Kind::adagrad && slot == 0
               ? static_cast<float>(desc_.initial_accumulator_value)
               : 0.0f;
  }

  std::vector<std::string> slot_names() const override {
    std::vector<std::string> names = update_slot_names();
    if (desc_.use_ema) names.emplace_back("average");  // Keras' names for them
    if (desc_.gradient_accumulation_steps > 1) names.emplace_back("gradient_accumulator");
    return names;
  }

 private:
  // The update rule's slots, in kernel_math's update_element order.
  std::vector<std::string> update_slot_names() const {
    switch (desc_.kind) {
      case backend::OptimizerDesc::Kind::sgd:
        return desc_.momentum > 0 ? std::vector<std::string>{"momentum"}
                                  : std::vector<std::string>{};
      case backend::OptimizerDesc::Kind::adam:
        if (desc_.amsgrad) return {"m", "v", "vhat"};
        return {"m", "v"};
      case backend::OptimizerDesc::Kind::rmsprop: {
        std::vector<std::string> s{"velocity"};
        if (desc_.momentum > 0) s.emplace_back("momentum");
        if (desc_.centered) s.emplace_back("average_gradient");
        return s;
      }
      case backend::OptimizerDesc::Kind::adagrad:
        return {"accumulator"};
      case backend::OptimizerDesc::Kind::adadelta:
        return {"accumulated_grad", "accumulated_delta_var"};
      case backend::OptimizerDesc::Kind::adamax:
        return {"m", "u"};
      case backend::OptimizerDesc::Kind::nadam:
        return {"m", "v"};
      case backend::OptimizerDesc::Kind::lion:
        return {"m"};
    }
    return {};
  }

  std::string cls_;
  backend::OptimizerDesc desc_;
};

std::string canonical(const std::string& n) {
  for (const auto& [name, alias] : optimizer_names())
    if (n == name || n == alias) return name;
  return "";
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& optimizer_names() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"SGD", "sgd"},         {"Adam", "adam"},     {"AdamW", "adamw"},
      {"RMSprop", "rmsprop"}, {"Adagrad", "adagrad"}, {"Adadelta", "adadelta"},
      {"Adamax", "adamax"},   {"Nadam", "nadam"},   {"Lion", "lion"}};
  return names;
}

namespace {

// A learning rate: a number, or a Keras schedule (then `value` is its first step's).
struct LearningRate {
  double value = 0;
  std::shared_ptr<const LearningRateSchedule> schedule;
};

// `learning_rate`, or Keras 2's `lr` (with a warning; not both): a number or a schedule.
LearningRate read_learning_rate(ConfigObject& cfg, double default_lr) {
  std::string key = "learning_rate";
  if (cfg.has("lr")) {
    if (cfg.has("learning_rate"))
      throw ConfigError(cfg.path_of("lr"),
                        "gives the learning rate a second time (Keras 2's "
                        "name for learning_rate, which is given too)");
    spdlog::warn(
        "{}: Keras 2's name for the learning rate; read as learning_rate, Keras 3's "
        "name",
        cfg.path_of("lr"));
    key = "lr";
  } else {
    cfg.ignore({"lr"});
  }
  if (cfg.has(key) && cfg.at(key).is_object()) {  // a schedule, not a number
    LearningRate lr{0, make_learning_rate_schedule(cfg.at(key), cfg.path_of(key))};
    lr.value = lr.schedule->at(0);
    return lr;
  }
  return {cfg.number_in(key, default_lr, 0.0, 1e9, true), nullptr};
}

// Keras 3's optimizers take one of clipnorm, clipvalue and global_clipnorm ("Only one of ... can
// be set"); tf.keras 2 refused two norms and, given clipnorm and clipvalue, applied clipnorm alone.
// Tandem applied every one given: refused, as Keras 3 does, naming the second.
void refuse_two_clippings(const ConfigObject& cfg, const backend::OptimizerDesc& d) {
  const std::pair<const char*, double> clips[] = {
      {"clipnorm", d.clipnorm}, {"clipvalue", d.clipvalue}, {"global_clipnorm", d.global_clipnorm}};
  const char* first = nullptr;
  for (const auto& [key, value] : clips) {
    if (value <= 0) continue;
    if (first)
      throw ConfigError(cfg.path_of(key), std::string("only one of clipnorm, clipvalue and "
                                                      "global_clipnorm can be set, as in Keras; "
                                                      "this optimizer also sets ") +
                                              first);
    first = key;
  }
}

// Keras 2's legacy Nadam: its `decay` (standalone Keras' `schedule_decay`, 0.004 by default and
// always in its config) is the momentum schedule's, u_t = beta_1 (1 - 0.5 * 0.96^(decay t)), and
// its learning rate is never decayed (tf-keras' legacy/nadam.py). Keras 3's Nadam has neither key
// and takes 0.96^t: 1 here.
double read_nadam_schedule_decay(ConfigObject& cfg) {
  for (const char* key : {"decay", "schedule_decay"})
    if (cfg.has(key)) {
      const double decay = cfg.number_in(key, 0.004, 0.0, 1e9);
      spdlog::info(
          "{}: Keras 2's legacy Nadam: the momentum schedule decays as 0.96^({} t), the "
          "learning rate is not decayed",
          cfg.path_of(key), decay);
      return decay;
    }
  return 1.0;
}

// Keras 2's legacy `decay` (learning_rate / (1 + decay * iterations)); 0 when absent.
double read_decay(ConfigObject& cfg) {
  const double decay = cfg.number_in("decay", 0.0, 0.0, 1e9);
  if (decay > 0)
    spdlog::warn("{}: Keras 2's time-based learning rate decay, applied as Keras 2 did "
                 "(learning_rate / (1 + decay * iterations)); Keras 3 spells it "
                 "InverseTimeDecay(learning_rate, decay_steps=1, decay_rate=decay)",
                 cfg.path_of("decay"));
  return decay;
}

// Keras 3's loss_scale_factor: the loss multiplied by it before the backward pass and the
// gradients divided by it again, every step applied — a fixed LossScale (null or 1: none).
std::optional<LossScaleConfig> read_loss_scale_factor(ConfigObject& cfg) {
  const double factor =
      cfg.number_in("loss_scale_factor", 1.0,
                    static_cast<double>(std::numeric_limits<float>::min()), kMaxLossScale);
  if (factor == 1.0) return std::nullopt;
  LossScaleConfig c;
  c.initial_scale = factor;
  c.dynamic = false;
  c.factor = true;
  return c;
}

// Keras' use_ema with its ema_momentum and ema_overwrite_frequency (0 or null: never). Which
// Keras the config is from decides where the averages start (OptimizerDesc::ema_keras2): tf.keras
// 2.11+ writes "is_legacy_optimizer": false into every optimizer's config, Keras 3 never does.
void read_moving_average(ConfigObject& cfg, backend::OptimizerDesc& d) {
  d.use_ema = cfg.get_bool("use_ema", false);
  d.ema_momentum = cfg.number_in("ema_momentum", 0.99, 0.0, 1.0);
  d.ema_overwrite_frequency = cfg.int_in("ema_overwrite_frequency", 0, 0, 1'000'000'000);
  const bool legacy = cfg.has("is_legacy_optimizer") && cfg.get_bool("is_legacy_optimizer");
  if (d.use_ema && legacy)
    throw ConfigError(cfg.path_of("use_ema"),
                      "Keras 2's legacy optimizers (is_legacy_optimizer: true) keep no moving "
                      "average; remove use_ema, or is_legacy_optimizer to use Keras' new ones");
  d.ema_keras2 = d.use_ema && cfg.given("is_legacy_optimizer");
}

// Keras' LossScaleOptimizer: Keras 3's {"inner_optimizer", "initial_scale",
// "dynamic_growth_steps"} and Keras 2's, which adds "dynamic".
std::unique_ptr<Optimizer> make_loss_scale_optimizer(const json& config, const std::string& path) {
  ConfigObject cfg(config, path);
  const json* inner = cfg.find("inner_optimizer");
  if (!inner)
    throw ConfigError(cfg.path_of("inner_optimizer"),
                      "a LossScaleOptimizer needs the optimizer it wraps (e.g. \"adam\" or "
                      "{\"class_name\": \"Adam\", \"config\": {...}})");
  const std::string inner_path = cfg.path_of("inner_optimizer");
  if (inner->is_object() && inner->contains("class_name") &&
      inner->at("class_name") == "LossScaleOptimizer")
    throw ConfigError(inner_path + ".class_name",
                      "a LossScaleOptimizer cannot wrap another LossScaleOptimizer");
  auto optimizer = make_optimizer(*inner, inner_path);
  if (optimizer->loss_scale())
    throw ConfigError(inner_path + ".config.loss_scale_factor",
                      "a LossScaleOptimizer scales the loss itself; remove the loss_scale_factor "
                      "of the optimizer it wraps");
  LossScaleConfig scale;
  scale.initial_scale =
      cfg.number_in("initial_scale", scale.initial_scale,
                    static_cast<double>(std::numeric_limits<float>::min()), kMaxLossScale);
  scale.growth_steps = cfg.int_in("dynamic_growth_steps", scale.growth_steps, 1, 1'000'000'000);
  scale.dynamic = cfg.get_bool("dynamic", true);
  cfg.ignore({"name"});
  cfg.finish();
  optimizer->set_loss_scale(scale);
  return optimizer;
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const json& spec, const std::string& path) {
  std::string name;
  std::string name_path = path;
  json empty = json::object();
  const json* cfg_json = &empty;
  std::string cfg_path = path + ".config";
  std::optional<ConfigObject> obj;
  if (spec.is_string()) {
    name = spec.get<std::string>();
  } else if (spec.is_object()) {
    obj.emplace(spec, path);
    name = obj->get_string("class_name");
    name_path = obj->path_of("class_name");
    obj->ignore({"module", "registered_name"});
    if (const json* c = obj->find("config")) cfg_json = c;
    obj->finish();
  } else {
    throw ConfigError(
        path, "expected an optimizer name or {\"class_name\": ...}, got " + json_type_name(spec));
  }
  if (name == "LossScaleOptimizer") return make_loss_scale_optimizer(*cfg_json, cfg_path);
  const std::string cls = canonical(name);
  if (cls.empty()) {
    std::string known;
    for (const auto& [n, alias] : optimizer_names()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError(name_path, "unknown optimizer '" + name + "' (known: " + known + ")");
  }
  ConfigObject cfg(*cfg_json, cfg_path);
  const double default_lr = cls == "SGD" ? 0.01 : 0.001;
  const LearningRate learning_rate = read_learning_rate(cfg, default_lr);
  const double nadam_schedule_decay = cls == "Nadam" ? read_nadam_schedule_decay(cfg) : 1.0;
  const double decay = cls == "Nadam" ? 0.0 : read_decay(cfg);
  if (decay > 0 && learning_rate.schedule)
    throw ConfigError(cfg.path_of("decay"),
                      "Keras 2's decay and a learning rate schedule, both: give the schedule "
                      "alone (InverseTimeDecay is what decay did)");
  backend::OptimizerDesc d;
  d.weight_decay = cfg.number_in("weight_decay", cls == "AdamW" ? 0.004 : 0.0, 0.0, 1e9);
  d.clipnorm = cfg.number_in("clipnorm", 0.0, 0.0, 1e30);
  d.clipvalue = cfg.number_in("clipvalue", 0.0, 0.0, 1e30);
  d.global_clipnorm = cfg.number_in("global_clipnorm", 0.0, 0.0, 1e30);
  refuse_two_clippings(cfg, d);
  const std::optional<LossScaleConfig> loss_scale = read_loss_scale_factor(cfg);
  read_moving_average(cfg, d);
  // Keras 3's gradient_accumulation_steps: null (or 0, falsy in Keras) is off, as is 1 here.
  d.gradient_accumulation_steps =
      std::max<std::int64_t>(1, cfg.int_in("gradient_accumulation_steps", 1, 0, 1'000'000));
  cfg.ignore({"name", "jit_compile", "is_legacy_optimizer"});
  if (cls == "SGD") {
    d.kind = backend::OptimizerDesc::Kind::sgd;
    d.momentum = cfg.number_in("momentum", 0.0, 0.0, 1.0);
    d.nesterov = cfg.get_bool("nesterov", false);
  } else if (cls == "Adam" || cls == "AdamW") {
    d.kind = backend::OptimizerDesc::Kind::adam;
    d.adamw = cls == "AdamW";
    d.beta_1 = cfg.number_in("beta_1", 0.9, 0.0, 1.0, false, true);
    d.beta_2 = cfg.number_in("beta_2", 0.999, 0.0, 1.0, false, true);
    d.epsilon = cfg.number_in("epsilon", 1e-7, 0.0, 1.0, true);
    d.amsgrad = cfg.get_bool("amsgrad", false);
  } else if (cls == "RMSprop") {
    d.kind = backend::OptimizerDesc::Kind::rmsprop;
    d.rho = cfg.number_in("rho", 0.9, 0.0, 1.0, false, true);
    d.momentum = cfg.number_in("momentum", 0.0, 0.0, 1.0, false, true);
    d.epsilon = cfg.number_in("epsilon", 1e-7, 0.0, 1.0, true);
    d.centered = cfg.get_bool("centered", false);
  } else if (cls == "Adagrad") {
    d.kind = backend::OptimizerDesc::Kind::adagrad;
    d.initial_accumulator_value = cfg.number_in("initial_accumulator_value", 0.1, 0.0, 1e9);
    d.epsilon = cfg.number_in("epsilon", 1e-7, 0.0, 1.0, true);
  } else if (cls == "Adadelta") {
    d.kind = backend::OptimizerDesc::Kind::adadelta;
    d.rho = cfg.number_in("rho", 0.95, 0.0, 1.0, false, true);
    d.epsilon = cfg.number_in("epsilon", 1e-7, 0.0, 1.0, true);
  } else if (cls == "Adamax" || cls == "Nadam") {
    d.kind = cls == "Adamax" ? backend::OptimizerDesc::Kind::adamax
                             : backend::OptimizerDesc::Kind::nadam;
    d.beta_1 = cfg.number_in("beta_1", 0.9, 0.0, 1.0, false, true);
    d.beta_2 = cfg.number_in("beta_2", 0.999, 0.0, 1.0, false, true);
    d.epsilon = cfg.number_in("epsilon", 1e-7, 0.0, 1.0, true);
    d.nadam_schedule_decay = nadam_schedule_decay;
  } else {  // Lion
    d.kind = backend::OptimizerDesc::Kind::lion;
    // Keras takes (0, 1]: 0 would make it SignSGD, 1 steps by the sign of the momentum alone.
    d.beta_1 = cfg.number_in("beta_1", 0.9, 0.0, 1.0, true, false);
    d.beta_2 = cfg.number_in("beta_2", 0.99, 0.0, 1.0, false, true);
  }
  auto opt = std::make_unique<KerasOptimizer>(cls, learning_rate.value, d);
  if (loss_scale) opt->set_loss_scale(*loss_scale);
  opt->set_decay(decay);
  opt->set_schedule(learning_rate.schedule);
  cfg.finish();
  return opt;
}

}  // namespace tandem
