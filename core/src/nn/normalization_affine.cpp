#include "nn/normalization_affine.hpp"

#include <tuple>

#include "tandem/error.hpp"

namespace tandem::nn {

void write_affine_normalization(const AffineNormalizationOptions& options, nlohmann::json& config) {
  config["axis"] = options.axis;
  config["epsilon"] = options.epsilon;
  config["center"] = options.center;
  config["scale"] = options.scale;
  config["beta_initializer"] = options.beta_initializer.config();
  config["gamma_initializer"] = options.gamma_initializer.config();
  for (const char* key :
       {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"})
    config[key] = nullptr;
}

void require_last_axis(const AffineNormalizationOptions& options, const Shape& input_shape,
                       const std::string& who) {
  const auto rank = static_cast<std::int64_t>(input_shape.size());
  if (options.axis != -1 && options.axis != rank)
    throw ShapeError(who + ": axis " + std::to_string(options.axis) +
                     " is not the last axis of inputs " + shape_to_string(input_shape, true) +
                     " (Tandem normalises over the last axis only)");
}

void build_gamma_beta(const AffineNormalizationOptions& options, std::int64_t channels,
                      Parameter& gamma, Parameter& beta, Rng& init) {
  for (auto [on, p, initializer] : {std::tuple{options.scale, &gamma, &options.gamma_initializer},
                                    std::tuple{options.center, &beta, &options.beta_initializer}}) {
    if (!on) continue;
    p->value = Tensor({channels});
    p->grad = Tensor({channels});
    initializer->fill(p->value, init);
  }
}

std::vector<Parameter*> gamma_beta(const AffineNormalizationOptions& options, Parameter& gamma,
                                   Parameter& beta) {
  std::vector<Parameter*> out;
  if (options.scale) out.push_back(&gamma);
  if (options.center) out.push_back(&beta);
  return out;
}

}  // namespace tandem::nn
