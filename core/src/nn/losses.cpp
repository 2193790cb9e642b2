// Keras losses: mean_squared_error, mean_absolute_error, binary_crossentropy,
// categorical_crossentropy, sparse_categorical_crossentropy (from probabilities or logits).
#include <algorithm>
#include <cmath>

#include "backend/cpu/parallel.hpp"
#include "tandem/config_object.hpp"
#include "tandem/error.hpp"
#include "tandem/loss.hpp"

namespace tandem {

namespace {

using nlohmann::json;

constexpr float kEpsilon = 1e-7f;  // Keras backend epsilon()

std::int64_t rows_of(const Tensor& t) {
  return t.rank() > 0 ? t.dim(0) : 1;
}

// Sums per-row values computed by f(row) in a fixed order (deterministic whatever the threads).
template <class F>
double sum_rows(std::int64_t rows, std::int64_t work_per_row, F f) {
  std::vector<double> per_row(static_cast<std::size_t>(rows));
  cpu::parallel_for(rows, std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(work_per_row, 1)),
                    [&](std::int64_t b, std::int64_t e) {
                      for (std::int64_t r = b; r < e; ++r)
                        per_row[static_cast<std::size_t>(r)] = f(r);
                    });
  double total = 0;
  for (double v : per_row) total += v;
  return total;
}

void check_batch(const Tensor& pred, const Tensor& target, const std::string& loss) {
  if (rows_of(pred) != rows_of(target))
    throw ShapeError(loss + ": predictions have " + std::to_string(rows_of(pred)) +
                     " samples, targets " + std::to_string(rows_of(target)));
}

// ---------------------------------------------------------------------------------------------
class ElementwiseRegression : public Loss {
 public:
  explicit ElementwiseRegression(bool squared) : squared_(squared) {}
  std::string name() const override {
    return squared_ ? "mean_squared_error" : "mean_absolute_error";
  }
  json config() const override { return name(); }
  void check_shapes(const Shape& output, const Shape& target) const override {
    if (shape_size(output) != shape_size(target))
      throw ShapeError(name() + ": targets " + shape_to_string(target, true) +
                       " do not match model outputs " + shape_to_string(output, true));
  }
  double compute(const Tensor& pred, const Tensor& target, float grad_scale,
                 Tensor* grad) const override {
    check_batch(pred, target, name());
    const std::int64_t rows = rows_of(pred), cols = pred.size() / std::max<std::int64_t>(rows, 1);
    if (target.size() != pred.size())
      throw ShapeError(name() + ": targets " + shape_to_string(target.shape()) +
                       " do not match predictions " + shape_to_string(pred.shape()));
    if (grad) grad->resize(pred.shape());
    const float* p = pred.data();
    const float* t = target.data();
    const float gs = grad_scale / static_cast<float>(cols);
    return sum_rows(rows, cols, [&](std::int64_t r) {
      double s = 0;
      for (std::int64_t c = r * cols; c < (r + 1) * cols; ++c) {
        const float d = p[c] - t[c];
        s += squared_ ? d * d : std::fabs(d);
        if (grad) (*grad)[c] = squared_ ? 2.0f * d * gs : (d > 0 ? gs : (d < 0 ? -gs : 0.0f));
      }
      return s / static_cast<double>(cols);
    });
  }

 private:
  bool squared_;
};

// ---------------------------------------------------------------------------------------------
class BinaryCrossentropy : public Loss {
 public:
  BinaryCrossentropy(bool from_logits, double label_smoothing)
      : from_logits_(from_logits), smoothing_(static_cast<float>(label_smoothing)) {}
  std::string name() const override { return "binary_crossentropy"; }
  bool from_logits() const override { return from_logits_; }
  json config() const override {
    return {{"class_name", "BinaryCrossentropy"},
            {"config", {{"from_logits", from_logits_}, {"label_smoothing", smoothing_}}}};
  }
  void check_shapes(const Shape& output, const Shape& target) const override {
    if (shape_size(output) != shape_size(target))
      throw ShapeError("binary_crossentropy: targets " + shape_to_string(target, true) +
                       " do not match model outputs " + shape_to_string(output, true));
  }
  double compute(const Tensor& pred, const Tensor& target, float grad_scale,
                 Tensor* grad) const override {
    check_batch(pred, target, name());
    if (target.size() != pred.size())
      throw ShapeError("binary_crossentropy: targets " + shape_to_string(target.shape()) +
                       " do not match predictions " + shape_to_string(pred.shape()));
    const std::int64_t rows = rows_of(pred), cols = pred.size() / std::max<std::int64_t>(rows, 1);
    if (grad) grad->resize(pred.shape());
    const float* p = pred.data();
    const float* tt = target.data();
    const float gs = grad_scale / static_cast<float>(cols);
    return sum_rows(rows, cols, [&](std::int64_t r) {
      double s = 0;
      for (std::int64_t c = r * cols; c < (r + 1) * cols; ++c) {
        const float t = tt[c] * (1.0f - smoothing_) + 0.5f * smoothing_;
        const float x = p[c];
        if (from_logits_) {
          // max(x, 0) - x t + log(1 + exp(-|x|)): stable for any x.
          s += std::max(x, 0.0f) - x * t + std::log1p(std::exp(-std::fabs(x)));
          if (grad) {
            const float sig =
                x >= 0 ? 1.0f / (1.0f + std::exp(-x)) : std::exp(x) / (1.0f + std::exp(x));
            (*grad)[c] = (sig - t) * gs;
          }
        } else {
          // Keras: clip to [eps, 1 - eps], then -(t log(p + eps) + (1 - t) log(1 - p + eps)).
          const bool clipped = x < kEpsilon || x > 1.0f - kEpsilon;
          const float q = std::clamp(x, kEpsilon, 1.0f - kEpsilon);
          s += -(t * std::log(q + kEpsilon) + (1.0f - t) * std::log(1.0f - q + kEpsilon));
          if (grad)
            (*grad)[c] =
                clipped ? 0.0f : (-t / (q + kEpsilon) + (1.0f - t) / (1.0f - q + kEpsilon)) * gs;
        }
      }
      return s / static_cast<double>(cols);
    });
  }

 private:
  bool from_logits_;
  float smoothing_;
};

// ---------------------------------------------------------------------------------------------
// Categorical cross-entropy with dense (one-hot / probability) or sparse (class index) targets.
class CategoricalCrossentropy : public Loss {
 public:
  CategoricalCrossentropy(bool sparse, bool from_logits, double label_smoothing)
      : sparse_(sparse),
        from_logits_(from_logits),
        smoothing_(static_cast<float>(label_smoothing)) {}
  std::string name() const override {
    return sparse_ ? "sparse_categorical_crossentropy" : "categorical_crossentropy";
  }
  bool from_logits() const override { return from_logits_; }
  json config() const override {
    json cfg = {{"from_logits", from_logits_}};
    if (!sparse_) cfg["label_smoothing"] = smoothing_;
    return {{"class_name", sparse_ ? "SparseCategoricalCrossentropy" : "CategoricalCrossentropy"},
            {"config", cfg}};
  }
  void check_shapes(const Shape& output, const Shape& target) const override {
    if (output.size() != 1)
      throw ShapeError(name() + " needs model outputs (None, classes), got " +
                       shape_to_string(output, true));
    if (sparse_ ? shape_size(target) != 1 : target != output)
      throw ShapeError(name() + ": targets " + shape_to_string(target, true) +
                       (sparse_ ? " must hold one class index per sample"
                                : " do not match model outputs " + shape_to_string(output, true)));
  }
  double compute(const Tensor& pred, const Tensor& target, float grad_scale,
                 Tensor* grad) const override {
    check_batch(pred, target, name());
    const std::int64_t rows = rows_of(pred),
                       classes = pred.size() / std::max<std::int64_t>(rows, 1);
    if (sparse_ ? target.size() != rows : target.size() != pred.size())
      throw ShapeError(name() + ": targets " + shape_to_string(target.shape()) +
                       " do not fit predictions " + shape_to_string(pred.shape()));
    if (grad) grad->resize(pred.shape());
    const float* tgt = target.data();
    return sum_rows(rows, classes, [&](std::int64_t r) {
      const float* p = pred.data() + r * classes;
      float* g = grad ? grad->data() + r * classes : nullptr;
      // Target distribution t[c] for this row (after label smoothing).
      auto target_at = [&](std::int64_t c) -> float {
        if (sparse_) return c == label(tgt[r], classes) ? 1.0f : 0.0f;
        return tgt[r * classes + c] * (1.0f - smoothing_) +
               smoothing_ / static_cast<float>(classes);
      };
      if (sparse_) label(tgt[r], classes);  // validates the label even when unused below
      double loss = 0;
      if (from_logits_) {
        float mx = p[0];
        for (std::int64_t c = 1; c < classes; ++c) mx = std::max(mx, p[c]);
        double z = 0;
        for (std::int64_t c = 0; c < classes; ++c) z += std::exp(static_cast<double>(p[c] - mx));
        const double log_z = std::log(z) + mx;
        for (std::int64_t c = 0; c < classes; ++c) {
          const float t = target_at(c);
          if (t != 0.0f) loss -= t * (p[c] - log_z);
          if (g) g[c] = static_cast<float>(std::exp(p[c] - log_z) - t) * grad_scale;
        }
      } else {
        // Keras: q = p / sum(p), clipped to [eps, 1 - eps]; loss = -sum t log q.
        double s = 0;
        for (std::int64_t c = 0; c < classes; ++c) s += p[c];
        double tsum_active = 0;
        for (std::int64_t c = 0; c < classes; ++c) {
          const float t = target_at(c);
          const double q = p[c] / s;
          const bool active = q >= kEpsilon && q <= 1.0 - kEpsilon;
          const double qc = std::clamp(q, static_cast<double>(kEpsilon), 1.0 - kEpsilon);
          if (t != 0.0f) loss -= t * std::log(qc);
          if (active) tsum_active += t;
        }
        if (g) {
          for (std::int64_t c = 0; c < classes; ++c) {
            const float t = target_at(c);
            const double q = p[c] / s;
            const bool active = q >= kEpsilon && q <= 1.0 - kEpsilon;
            const double own = active ? -t / q : 0.0;
            g[c] = static_cast<float>((own + tsum_active) / s) * grad_scale;
          }
        }
      }
      return loss;
    });
  }

 private:
  static std::int64_t label(float value, std::int64_t classes) {
    const auto k = static_cast<std::int64_t>(value);
    if (static_cast<float>(k) != value || k < 0 || k >= classes)
      throw DataError("sparse_categorical_crossentropy: label " + std::to_string(value) +
                      " is not a class index in [0, " + std::to_string(classes) + ")");
    return k;
  }

  bool sparse_;
  bool from_logits_;
  float smoothing_;
};

std::string canonical_loss_name(const std::string& n) {
  if (n == "mse" || n == "mean_squared_error" || n == "MeanSquaredError") return "mse";
  if (n == "mae" || n == "mean_absolute_error" || n == "MeanAbsoluteError") return "mae";
  if (n == "binary_crossentropy" || n == "BinaryCrossentropy") return "bce";
  if (n == "categorical_crossentropy" || n == "CategoricalCrossentropy") return "cce";
  if (n == "sparse_categorical_crossentropy" || n == "SparseCategoricalCrossentropy") return "scce";
  return "";
}

}  // namespace

std::unique_ptr<Loss> make_loss(const json& spec, const std::string& path) {
  std::string name;
  bool from_logits = false;
  double smoothing = 0.0;
  std::string name_path = path;
  if (spec.is_string()) {
    name = spec.get<std::string>();
  } else if (spec.is_object()) {
    ConfigObject obj(spec, path);
    name = obj.get_string("class_name");
    name_path = obj.path_of("class_name");
    obj.ignore({"module", "registered_name"});
    if (obj.has("config")) {
      ConfigObject cfg = obj.get_object("config");
      from_logits = cfg.get_bool("from_logits", false);
      const std::string canon = canonical_loss_name(name);
      if (canon == "bce" || canon == "cce")
        smoothing = cfg.number_in("label_smoothing", 0.0, 0.0, 1.0);
      if (canon == "mse" || canon == "mae") cfg.ignore({"from_logits"});
      cfg.one_of("reduction", "sum_over_batch_size", {"sum_over_batch_size", "auto"});
      cfg.ignore({"name", "axis"});
      cfg.finish();
    }
    obj.finish();
  } else {
    throw ConfigError(path,
                      "expected a loss name or {\"class_name\": ...}, got " + json_type_name(spec));
  }
  const std::string canon = canonical_loss_name(name);
  if (canon == "mse") return std::make_unique<ElementwiseRegression>(true);
  if (canon == "mae") return std::make_unique<ElementwiseRegression>(false);
  if (canon == "bce") return std::make_unique<BinaryCrossentropy>(from_logits, smoothing);
  if (canon == "cce")
    return std::make_unique<CategoricalCrossentropy>(false, from_logits, smoothing);
  if (canon == "scce") return std::make_unique<CategoricalCrossentropy>(true, from_logits, 0.0);
  throw ConfigError(name_path,
                    "unknown loss '" + name +
                        "' (known: mean_squared_error, mean_absolute_error, binary_crossentropy, "
                        "categorical_crossentropy, sparse_categorical_crossentropy)");
}

}  // namespace tandem
