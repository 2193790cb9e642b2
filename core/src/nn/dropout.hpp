// Dropout: during training zeroes each value with probability `rate` and scales the rest by
// 1/(1-rate) (inverted dropout, as Keras); the identity at inference.
//
// The mask is a counter-based hash of (seed, training step, global sample index, element), not a
// sequential stream: a replica holding rows [offset, offset + n) of a batch draws exactly the
// masks the whole-batch model draws for those rows, so dropout never depends on the device plan.
#pragma once

#include <optional>

#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Dropout : public Layer {
 public:
  Dropout(std::string name, double rate, std::optional<std::uint64_t> seed);
  std::string class_name() const override { return "Dropout"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;
  /// {stream seed, training forwards so far}.
  std::vector<std::uint64_t> random_state() const override { return {stream_, calls_}; }
  void set_random_state(const std::vector<std::uint64_t>& state) override;

 private:
  double rate_;
  std::optional<std::uint64_t> seed_;
  std::uint64_t stream_ = 0;  // from the config seed, else from the model's init stream
  std::uint64_t calls_ = 0;   // training forwards so far: the same on every replica
  bool masked_ = false;       // whether the last forward applied a mask
  Tensor mask_, output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
