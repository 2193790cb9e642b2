// GaussianNoise and GaussianDropout (Keras' regularization layers), active in training only:
//   GaussianNoise(stddev)  y = x + stddev·n,                          dx = dy
//   GaussianDropout(rate)  y = x·m, m = 1 + sqrt(rate / (1 - rate))·n,  dx = dy·m
// with n standard normal per element from the layer's RandomStream (nn/random_stream.hpp), so
// the noise never depends on the device plan. The identity at inference.
#pragma once

#include <optional>

#include "nn/random_stream.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class GaussianNoise : public Layer {
 public:
  enum class Kind { additive, multiplicative };
  /// `amount`: the stddev (additive, GaussianNoise) or the rate (multiplicative, GaussianDropout).
  GaussianNoise(std::string name, Kind kind, double amount, std::optional<std::uint64_t> seed);
  std::string class_name() const override {
    return kind_ == Kind::additive ? "GaussianNoise" : "GaussianDropout";
  }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;
  std::vector<std::uint64_t> random_state() const override { return random_.state(); }
  void set_random_state(const std::vector<std::uint64_t>& state) override {
    random_.set_state(state, name());
  }

 private:
  Kind kind_;
  double amount_;
  RandomStream random_;
  bool noisy_ = false;  // whether the last forward added noise
  Tensor noise_;        // n, then for GaussianDropout the factor m
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
