#include "nn/initializer.hpp"

#include <cmath>
#include <memory>
#include <vector>

#include "util/config_object.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

using nlohmann::json;

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
                            {"variance_scaling", "VarianceScaling"},
                            {"zeros", "Zeros"},
                            {"ones", "Ones"},
                            {"constant", "Constant"},
                            {"random_normal", "RandomNormal"},
                            {"random_uniform", "RandomUniform"},
                            {"truncated_normal", "TruncatedNormal"},
                            {"orthogonal", "Orthogonal"},
                            {"identity", "Identity"}};

// Keras' short aliases, {alias, canonical name} (keras.initializers.get("uniform") is a
// RandomUniform()).
constexpr Known kAliases[] = {{"uniform", "random_uniform"}, {"normal", "random_normal"},
                              {"one", "ones"},               {"zero", "zeros"},
                              {"IdentityInitializer", "identity"},
                              {"OrthogonalInitializer", "orthogonal"}};

// The VarianceScaling each of Keras' named schemes is: {scale, mode, distribution}.
struct Scheme {
  const char* name;
  double scale;
  const char* mode;
  const char* distribution;
};
constexpr Scheme kSchemes[] = {{"glorot_uniform", 1.0, "fan_avg", "uniform"},
                               {"glorot_normal", 1.0, "fan_avg", "truncated_normal"},
                               {"he_normal", 2.0, "fan_in", "truncated_normal"},
                               {"he_uniform", 2.0, "fan_in", "uniform"},
                               {"lecun_normal", 1.0, "fan_in", "truncated_normal"},
                               {"lecun_uniform", 1.0, "fan_in", "uniform"}};

// A standard normal truncated at two standard deviations (redrawn beyond), as Keras draws it.
float truncated_normal(Rng& rng) {
  for (;;) {
    float z = rng.normal();
    if (std::fabs(z) <= 2.0f) return z;
  }
}

// Keras' VarianceScaling keys, checked.
void read_variance_scaling(ConfigObject& cfg, Initializer& init) {
  init.scale = cfg.get_number("scale", init.scale);
  if (!(init.scale > 0) || !std::isfinite(init.scale))
    throw ConfigError(cfg.path_of("scale"), "expected a positive number, got " +
                                                cfg.at("scale").dump());
  init.mode = cfg.one_of("mode", init.mode, {"fan_in", "fan_out", "fan_avg"});
  // Keras lowercases it, and takes "normal" for the truncated normal.
  std::string d =
      cfg.one_of_any_case("distribution", init.distribution,
                          {"truncated_normal", "untruncated_normal", "uniform", "normal"});
  init.distribution = d == "normal" ? "truncated_normal" : d;
}

void read_config(const std::string& name, ConfigObject& cfg, Initializer& init) {
  if (cfg.has("seed"))
    init.seed = static_cast<std::uint64_t>(cfg.get_int("seed"));
  else
    cfg.ignore({"seed"});
  if (name == "constant") init.value = cfg.get_number("value", 0.0);
  if (name == "random_uniform") {
    init.minval = cfg.get_number("minval", init.minval);
    init.maxval = cfg.get_number("maxval", init.maxval);
    if (init.maxval < init.minval)
      throw ConfigError(cfg.path_of("maxval"), "must not be below minval");
  }
  if (name == "random_normal" || name == "truncated_normal") {
    init.mean = cfg.get_number("mean", init.mean);
    init.stddev = cfg.get_number("stddev", init.stddev);
    if (init.stddev < 0) throw ConfigError(cfg.path_of("stddev"), "must not be negative");
  }
  if (name == "variance_scaling") read_variance_scaling(cfg, init);
  if (name == "orthogonal" || name == "identity") {
    init.gain = cfg.get_number("gain", 1.0);
    if (!std::isfinite(init.gain))
      throw ConfigError(cfg.path_of("gain"), "expected a finite number");
  }
  cfg.finish();
}

// Rows and columns of a weight as Keras' Orthogonal and Identity flatten it: every axis but
// the last, and the last.
std::pair<std::int64_t, std::int64_t> matrix_of(const Tensor& t) {
  const std::int64_t cols = t.rank() > 0 ? t.dim(t.rank() - 1) : 1;
  return {cols > 0 ? t.size() / cols : 0, cols};
}

// Keras' Orthogonal: a normal (max x min) matrix orthonormalized by its QR factorization, the
// signs of R's diagonal taken out (modified Gram-Schmidt, in double, gives R's diagonal
// positive), transposed when the weight is wide, times gain.
void fill_orthogonal(Tensor& t, double gain, Rng& rng) {
  const auto [rows, cols] = matrix_of(t);
  const std::int64_t tall = std::max(rows, cols), narrow = std::min(rows, cols);
  std::vector<double> a(static_cast<std::size_t>(tall * narrow));  // column j at a[j * tall]
  for (double& v : a) v = rng.normal();
  for (std::int64_t j = 0; j < narrow; ++j) {
    double* q = a.data() + j * tall;
    for (std::int64_t k = 0; k < j; ++k) {
      const double* p = a.data() + k * tall;
      double dot = 0;
      for (std::int64_t i = 0; i < tall; ++i) dot += p[i] * q[i];
      for (std::int64_t i = 0; i < tall; ++i) q[i] -= dot * p[i];
    }
    double norm = 0;
    for (std::int64_t i = 0; i < tall; ++i) norm += q[i] * q[i];
    norm = std::sqrt(norm);
    for (std::int64_t i = 0; i < tall; ++i) q[i] /= norm;
  }
  float* out = t.data();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double v = rows >= cols ? a[static_cast<std::size_t>(c * tall + r)]
                                    : a[static_cast<std::size_t>(r * tall + c)];
      out[r * cols + c] = static_cast<float>(gain * v);
    }
}

void fill_identity(Tensor& t, double gain) {
  if (t.rank() != 2)
    throw ShapeError("the Identity initializer makes 2-D weights only, got shape " +
                     shape_to_string(t.shape()));
  t.fill(0.0f);
  for (std::int64_t i = 0; i < std::min(t.dim(0), t.dim(1)); ++i)
    t[i * t.dim(1) + i] = static_cast<float>(gain);
}

}  // namespace

Initializer parse_initializer(const nlohmann::json& spec, const std::string& path) {
  Initializer init;
  const KerasObject o = read_keras_object(spec, path, "an initializer name");
  std::string name = o.name;
  for (const auto& a : kAliases)
    if (name == a.snake) name = a.camel;
  for (const auto& k : kKnown)
    if (name == k.snake || name == k.camel) init.name = k.snake;
  if (init.name.empty()) {
    std::string list;
    for (const auto& k : kKnown) list += (list.empty() ? "" : ", ") + std::string(k.snake);
    throw ConfigError(o.name_path, "unknown initializer '" + name + "' (known: " + list + ")");
  }
  if (o.config) {
    ConfigObject cfg(*o.config, o.config_path);
    read_config(init.name, cfg, init);
  }
  return init;
}

nlohmann::json Initializer::config() const {
  for (const auto& k : kKnown) {
    if (name != k.snake) continue;
    json cfg = json::object();
    if (name != "zeros" && name != "ones" && name != "constant" && name != "identity")
      cfg["seed"] = seed ? json(*seed) : json(nullptr);
    if (name == "constant") cfg["value"] = value;
    if (name == "random_uniform") {
      cfg["minval"] = minval;
      cfg["maxval"] = maxval;
    }
    if (name == "random_normal" || name == "truncated_normal") {
      cfg["mean"] = mean;
      cfg["stddev"] = stddev;
    }
    if (name == "variance_scaling") {
      cfg["scale"] = scale;
      cfg["mode"] = mode;
      cfg["distribution"] = distribution;
    }
    if (name == "orthogonal" || name == "identity") cfg["gain"] = gain;
    return {{"class_name", k.camel}, {"config", cfg}};
  }
  return name;
}

std::pair<std::int64_t, std::int64_t> keras_fans(const Shape& shape) {
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) return {shape[0], shape[0]};
  std::int64_t receptive = 1;
  for (std::size_t i = 0; i + 2 < shape.size(); ++i) receptive *= shape[i];
  return {shape[shape.size() - 2] * receptive, shape.back() * receptive};
}

void Initializer::fill(Tensor& t, Rng& model_rng) const {
  Rng own(seed ? *seed : 0);
  Rng& rng = seed ? own : model_rng;
  float* p = t.data();
  const std::int64_t n = t.size();
  if (name == "zeros" || name == "ones" || name == "constant") {
    t.fill(name == "zeros" ? 0.0f : name == "ones" ? 1.0f : static_cast<float>(value));
  } else if (name == "random_normal") {
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<float>(mean) + static_cast<float>(stddev) * rng.normal();
  } else if (name == "truncated_normal") {
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<float>(mean + stddev * truncated_normal(rng));
  } else if (name == "random_uniform" && minval == -maxval) {  // Keras' default +-0.05
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * maxval);
  } else if (name == "random_uniform") {
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<float>(minval + (maxval - minval) * rng.uniform());
  } else if (name == "orthogonal") {
    fill_orthogonal(t, gain, rng);
  } else if (name == "identity") {
    fill_identity(t, gain);
  } else {  // variance_scaling and the schemes that are one
    double scale = this->scale;
    std::string mode = this->mode, distribution = this->distribution;
    for (const Scheme& s : kSchemes)
      if (name == s.name) scale = s.scale, mode = s.mode, distribution = s.distribution;
    // variance = scale * k / d: 1 / fan_in, 1 / fan_out, or 2 / (fan_in + fan_out) for the
    // average (multiplied out in this order, Keras' named schemes give their usual limits
    // exactly: sqrt(6 / (fan_in + fan_out)) for glorot_uniform).
    const auto [fan_in, fan_out] = keras_fans(t.shape());
    const double fin = static_cast<double>(std::max<std::int64_t>(fan_in, 1));
    const double fout = static_cast<double>(std::max<std::int64_t>(fan_out, 1));
    const double k = mode == "fan_avg" ? 2.0 : 1.0;
    const double d = mode == "fan_in" ? fin : mode == "fan_out" ? fout : fin + fout;
    const double variance = scale * k / d;
    if (distribution == "uniform") {
      const double limit = std::sqrt(3.0 * scale * k / d);
      for (std::int64_t i = 0; i < n; ++i)
        p[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * limit);
    } else if (distribution == "untruncated_normal") {
      const double s = std::sqrt(variance);
      for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(s * rng.normal());
    } else {
      // Keras divides by .87962566103423978 so the truncated distribution has the wanted variance.
      const double s = std::sqrt(variance) / .87962566103423978;
      for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(truncated_normal(rng) * s);
    }
  }
}

}  // namespace tandem::nn
