#include "nn/initializer.hpp"

#include <cmath>

#include "util/config_object.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

struct Known {
  const char* snake;
  const char* camel;
};

constexpr Known kKnown[] = {{"glorot_uniform", "GlorotUniform"},
                            {"glorot_normal", "GlorotNormal"},
                            {"he_normal", "HeNormal"},
                            {"he_uniform", "HeUniform"},
                            {"lecun_normal", "LecunNormal"},
                            {"lecun_uniform", "LecunUniform"},
                            {"zeros", "Zeros"},
                            {"ones", "Ones"},
                            {"constant", "Constant"},
                            {"random_normal", "RandomNormal"},
                            {"random_uniform", "RandomUniform"}};

// Keras' short aliases, {alias, canonical name} (keras.initializers.get("uniform") is a
// RandomUniform()).
constexpr Known kAliases[] = {
    {"uniform", "random_uniform"}, {"normal", "random_normal"}, {"one", "ones"}, {"zero", "zeros"}};

// Truncated normal at two standard deviations (as Keras' VarianceScaling draws it).
float truncated_normal(Rng& rng) {
  for (;;) {
    float z = rng.normal();
    if (std::fabs(z) <= 2.0f) return z;
  }
}

}  // namespace

Initializer parse_initializer(const nlohmann::json& spec, const std::string& path) {
  Initializer init;
  std::string name;
  if (spec.is_string()) {
    name = spec.get<std::string>();
  } else if (spec.is_object()) {
    ConfigObject obj(spec, path);
    name = obj.get_string("class_name");
    if (obj.has("config")) {
      ConfigObject cfg = obj.get_object("config");
      if (cfg.has("seed"))
        init.seed = static_cast<std::uint64_t>(cfg.get_int("seed"));
      else
        cfg.ignore({"seed"});
      if (name == "Constant" || name == "constant") init.value = cfg.get_number("value", 0.0);
      if (name == "RandomUniform" || name == "random_uniform" || name == "uniform") {
        init.minval = cfg.get_number("minval", init.minval);
        init.maxval = cfg.get_number("maxval", init.maxval);
        if (init.maxval < init.minval)
          throw ConfigError(cfg.path_of("maxval"), "must not be below minval");
      }
      if (name == "RandomNormal" || name == "random_normal" || name == "normal") {
        init.mean = cfg.get_number("mean", init.mean);
        init.stddev = cfg.get_number("stddev", init.stddev);
        if (init.stddev < 0) throw ConfigError(cfg.path_of("stddev"), "must not be negative");
      }
      cfg.finish();
    }
    obj.ignore({"module", "registered_name"});
    obj.finish();
  } else {
    throw ConfigError(
        path, "expected an initializer name or {\"class_name\": ...}, got " + json_type_name(spec));
  }
  for (const auto& a : kAliases)
    if (name == a.snake) name = a.camel;
  for (const auto& k : kKnown) {
    if (name == k.snake || name == k.camel) {
      init.name = k.snake;
      return init;
    }
  }
  std::string list;
  for (const auto& k : kKnown) list += (list.empty() ? "" : ", ") + std::string(k.snake);
  throw ConfigError(path, "unknown initializer '" + name + "' (known: " + list + ")");
}

nlohmann::json Initializer::config() const {
  for (const auto& k : kKnown) {
    if (name == k.snake) {
      nlohmann::json cfg = nlohmann::json::object();
      if (name != "zeros" && name != "ones" && name != "constant")
        cfg["seed"] = seed ? nlohmann::json(*seed) : nlohmann::json(nullptr);
      if (name == "constant") cfg["value"] = value;
      if (name == "random_uniform") {
        cfg["minval"] = minval;
        cfg["maxval"] = maxval;
      }
      if (name == "random_normal") {
        cfg["mean"] = mean;
        cfg["stddev"] = stddev;
      }
      return {{"class_name", k.camel}, {"config", cfg}};
    }
  }
  return name;
}

void Initializer::fill(Tensor& t, std::int64_t fan_in, std::int64_t fan_out, Rng& model_rng) const {
  Rng own(seed ? *seed : 0);
  Rng& rng = seed ? own : model_rng;
  float* p = t.data();
  const std::int64_t n = t.size();
  const double fin = static_cast<double>(std::max<std::int64_t>(fan_in, 1));
  const double fout = static_cast<double>(std::max<std::int64_t>(fan_out, 1));
  auto uniform = [&](double limit) {
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * limit);
  };
  auto trunc_normal = [&](double scale_over_fan) {
    // Keras divides by .87962566103423978 so the truncated distribution has the wanted variance.
    const double stddev = std::sqrt(scale_over_fan) / .87962566103423978;
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(truncated_normal(rng) * stddev);
  };
  if (name == "glorot_uniform")
    uniform(std::sqrt(6.0 / (fin + fout)));
  else if (name == "glorot_normal")
    trunc_normal(2.0 / (fin + fout));
  else if (name == "he_normal")
    trunc_normal(2.0 / fin);
  else if (name == "he_uniform")
    uniform(std::sqrt(6.0 / fin));
  else if (name == "lecun_normal")
    trunc_normal(1.0 / fin);
  else if (name == "lecun_uniform")
    uniform(std::sqrt(3.0 / fin));
  else if (name == "zeros")
    t.fill(0.0f);
  else if (name == "ones")
    t.fill(1.0f);
  else if (name == "constant")
    t.fill(static_cast<float>(value));
  else if (name == "random_normal")
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<float>(mean) + static_cast<float>(stddev) * rng.normal();
  else if (name == "random_uniform" && minval == -maxval)
    uniform(maxval);  // the symmetric case (Keras' default +-0.05)
  else if (name == "random_uniform")
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<float>(minval + (maxval - minval) * rng.uniform());
}

}  // namespace tandem::nn
