// SGD, Adam, AdamW and RMSprop with Keras 3 update rules and defaults.
#include <cmath>

#include "backend/cpu/parallel.hpp"
#include "tandem/config_object.hpp"
#include "tandem/error.hpp"
#include "tandem/optimizer.hpp"

namespace tandem {

namespace {

using nlohmann::json;
constexpr std::int64_t kChunk = 1 << 16;  // memory bound: fork only for large tensors

struct Common {
  double learning_rate, weight_decay, clipnorm, clipvalue, global_clipnorm;
};

class Sgd : public Optimizer {
 public:
  Sgd(Common c, double momentum, bool nesterov)
      : Optimizer(c.learning_rate, c.weight_decay, c.clipnorm, c.clipvalue, c.global_clipnorm),
        momentum_(momentum),
        nesterov_(nesterov) {}
  std::string class_name() const override { return "SGD"; }
  json config() const override {
    json c = base_config("SGD");
    c["momentum"] = momentum_;
    c["nesterov"] = nesterov_;
    return c;
  }
  std::vector<std::string> slot_names() const override {
    return momentum_ > 0 ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
  }

 protected:
  void update(Parameter& p, const float* g, std::vector<Tensor>& slots, std::int64_t) override {
    float* w = p.value.data();
    const float lr = static_cast<float>(learning_rate_);
    if (momentum_ <= 0) {
      cpu::parallel_for(p.value.size(), kChunk, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t k = b; k < e; ++k) w[k] -= lr * g[k];
      });
      return;
    }
    float* m = slots[0].data();
    const float mu = static_cast<float>(momentum_);
    cpu::parallel_for(p.value.size(), kChunk, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t k = b; k < e; ++k) {
        m[k] = mu * m[k] - lr * g[k];
        w[k] += nesterov_ ? mu * m[k] - lr * g[k] : m[k];
      }
    });
  }

 private:
  double momentum_;
  bool nesterov_;
};

class Adam : public Optimizer {
 public:
  Adam(std::string cls, Common c, double beta_1, double beta_2, double epsilon, bool amsgrad)
      : Optimizer(c.learning_rate, c.weight_decay, c.clipnorm, c.clipvalue, c.global_clipnorm),
        cls_(std::move(cls)),
        beta_1_(beta_1),
        beta_2_(beta_2),
        epsilon_(epsilon),
        amsgrad_(amsgrad) {}
  std::string class_name() const override { return cls_; }
  json config() const override {
    json c = base_config(cls_);
    c["beta_1"] = beta_1_;
    c["beta_2"] = beta_2_;
    c["epsilon"] = epsilon_;
    c["amsgrad"] = amsgrad_;
    return c;
  }
  std::vector<std::string> slot_names() const override {
    if (amsgrad_) return {"m", "v", "vhat"};
    return {"m", "v"};
  }

 protected:
  void update(Parameter& p, const float* g, std::vector<Tensor>& slots,
              std::int64_t step) override {
    // Keras: alpha = lr * sqrt(1 - b2^t) / (1 - b1^t); w -= alpha * m / (sqrt(v) + eps).
    const double t = static_cast<double>(step);
    const float alpha = static_cast<float>(learning_rate_ * std::sqrt(1.0 - std::pow(beta_2_, t)) /
                                           (1.0 - std::pow(beta_1_, t)));
    const float b1 = static_cast<float>(beta_1_), b2 = static_cast<float>(beta_2_);
    const float eps = static_cast<float>(epsilon_);
    float* __restrict w = p.value.data();
    float* __restrict m = slots[0].data();
    float* __restrict v = slots[1].data();
    const float* __restrict gr = g;
    // Two straight-line loops (no branch inside) so the compiler vectorises them.
    if (!amsgrad_) {
      cpu::parallel_for(p.value.size(), kChunk, [=](std::int64_t b, std::int64_t e) {
        for (std::int64_t k = b; k < e; ++k) {
          m[k] += (gr[k] - m[k]) * (1.0f - b1);
          v[k] += (gr[k] * gr[k] - v[k]) * (1.0f - b2);
          w[k] -= (m[k] * alpha) / (std::sqrt(v[k]) + eps);
        }
      });
      return;
    }
    float* __restrict vhat = slots[2].data();
    cpu::parallel_for(p.value.size(), kChunk, [=](std::int64_t b, std::int64_t e) {
      for (std::int64_t k = b; k < e; ++k) {
        m[k] += (gr[k] - m[k]) * (1.0f - b1);
        v[k] += (gr[k] * gr[k] - v[k]) * (1.0f - b2);
        vhat[k] = std::max(vhat[k], v[k]);
        w[k] -= (m[k] * alpha) / (std::sqrt(vhat[k]) + eps);
      }
    });
  }

 private:
  std::string cls_;
  double beta_1_, beta_2_, epsilon_;
  bool amsgrad_;
};

class RmsProp : public Optimizer {
 public:
  RmsProp(Common c, double rho, double momentum, double epsilon, bool centered)
      : Optimizer(c.learning_rate, c.weight_decay, c.clipnorm, c.clipvalue, c.global_clipnorm),
        rho_(rho),
        momentum_(momentum),
        epsilon_(epsilon),
        centered_(centered) {}
  std::string class_name() const override { return "RMSprop"; }
  json config() const override {
    json c = base_config("RMSprop");
    c["rho"] = rho_;
    c["momentum"] = momentum_;
    c["epsilon"] = epsilon_;
    c["centered"] = centered_;
    return c;
  }
  std::vector<std::string> slot_names() const override {
    std::vector<std::string> s{"velocity"};
    if (momentum_ > 0) s.emplace_back("momentum");
    if (centered_) s.emplace_back("average_gradient");
    return s;
  }

 protected:
  void update(Parameter& p, const float* g, std::vector<Tensor>& slots, std::int64_t) override {
    // Keras: v = rho v + (1 - rho) g²; denom = v (- avg²) + eps; inc = lr g / sqrt(denom).
    const float rho = static_cast<float>(rho_), lr = static_cast<float>(learning_rate_);
    const float eps = static_cast<float>(epsilon_), mu = static_cast<float>(momentum_);
    float* w = p.value.data();
    float* vel = slots[0].data();
    float* mom = momentum_ > 0 ? slots[1].data() : nullptr;
    float* avg = centered_ ? slots[momentum_ > 0 ? 2 : 1].data() : nullptr;
    const std::int64_t n = p.value.size();
    // One branch-free loop per variant, so each vectorises.
    if (avg && mom)
      run<true, true>(n, w, vel, mom, avg, g, rho, lr, eps, mu);
    else if (avg)
      run<true, false>(n, w, vel, mom, avg, g, rho, lr, eps, mu);
    else if (mom)
      run<false, true>(n, w, vel, mom, avg, g, rho, lr, eps, mu);
    else
      run<false, false>(n, w, vel, mom, avg, g, rho, lr, eps, mu);
  }

 private:
  template <bool Centered, bool Momentum>
  static void run(std::int64_t n, float* __restrict w, float* __restrict vel, float* __restrict mom,
                  float* __restrict avg, const float* __restrict g, float rho, float lr, float eps,
                  float mu) {
    cpu::parallel_for(n, kChunk, [=](std::int64_t b, std::int64_t e) {
      for (std::int64_t k = b; k < e; ++k) {
        vel[k] = rho * vel[k] + (1.0f - rho) * g[k] * g[k];
        float denom = vel[k] + eps;
        if constexpr (Centered) {
          avg[k] = rho * avg[k] + (1.0f - rho) * g[k];
          denom = vel[k] - avg[k] * avg[k] + eps;
        }
        const float inc = lr * g[k] / std::sqrt(denom);
        if constexpr (Momentum) {
          mom[k] = mu * mom[k] + inc;
          w[k] -= mom[k];
        } else {
          w[k] -= inc;
        }
      }
    });
  }

  double rho_, momentum_, epsilon_;
  bool centered_;
};

std::string canonical(const std::string& n) {
  if (n == "sgd" || n == "SGD") return "SGD";
  if (n == "adam" || n == "Adam") return "Adam";
  if (n == "adamw" || n == "AdamW") return "AdamW";
  if (n == "rmsprop" || n == "RMSprop") return "RMSprop";
  return "";
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
  const std::string cls = canonical(name);
  if (cls.empty())
    throw ConfigError(name_path,
                      "unknown optimizer '" + name + "' (known: SGD, Adam, AdamW, RMSprop)");
  ConfigObject cfg(*cfg_json, cfg_path);
  const double default_lr = cls == "SGD" ? 0.01 : 0.001;
  Common c;
  c.learning_rate = cfg.number_in("learning_rate", default_lr, 0.0, 1e9, true);
  c.weight_decay = cfg.number_in("weight_decay", cls == "AdamW" ? 0.004 : 0.0, 0.0, 1e9);
  c.clipnorm = cfg.number_in("clipnorm", 0.0, 0.0, 1e30);
  c.clipvalue = cfg.number_in("clipvalue", 0.0, 0.0, 1e30);
  c.global_clipnorm = cfg.number_in("global_clipnorm", 0.0, 0.0, 1e30);
  cfg.ignore({"name", "use_ema", "ema_momentum", "ema_overwrite_frequency", "loss_scale_factor",
              "gradient_accumulation_steps", "jit_compile", "is_legacy_optimizer"});
  std::unique_ptr<Optimizer> opt;
  if (cls == "SGD") {
    double momentum = cfg.number_in("momentum", 0.0, 0.0, 1.0);
    bool nesterov = cfg.get_bool("nesterov", false);
    opt = std::make_unique<Sgd>(c, momentum, nesterov);
  } else if (cls == "Adam" || cls == "AdamW") {
    double b1 = cfg.number_in("beta_1", 0.9, 0.0, 1.0, false, true);
    double b2 = cfg.number_in("beta_2", 0.999, 0.0, 1.0, false, true);
    double eps = cfg.number_in("epsilon", 1e-7, 0.0, 1.0, true);
    bool amsgrad = cfg.get_bool("amsgrad", false);
    opt = std::make_unique<Adam>(cls, c, b1, b2, eps, amsgrad);
  } else {
    double rho = cfg.number_in("rho", 0.9, 0.0, 1.0, false, true);
    double momentum = cfg.number_in("momentum", 0.0, 0.0, 1.0, false, true);
    double eps = cfg.number_in("epsilon", 1e-7, 0.0, 1.0, true);
    bool centered = cfg.get_bool("centered", false);
    opt = std::make_unique<RmsProp>(c, rho, momentum, eps, centered);
  }
  cfg.finish();
  return opt;
}

}  // namespace tandem
