// Private (nn): what Keras' wrappers of one layer share (TimeDistributed, SpectralNormalization):
// the wrapped layer they own, whose random state, weight rules (constraints, regularizers) and
// Keras 2 definitions are the wrapper's.
// Ownership: the wrapper owns the wrapped layer for its lifetime. Threads: as every layer's.
#pragma once

#include <memory>
#include <vector>

#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class LayerWrapper : public Layer, public WeightRules, public KerasTwoDefinitions {
 public:
  LayerWrapper(std::string name, std::unique_ptr<Layer> inner)
      : Layer(std::move(name)), inner_(std::move(inner)) {}
  std::vector<RuledWeight> ruled_weights() override {
    auto* rules = dynamic_cast<WeightRules*>(inner_.get());
    return rules ? rules->ruled_weights() : std::vector<RuledWeight>{};
  }
  std::vector<std::uint64_t> random_state() const override { return inner_->random_state(); }
  void set_random_state(const std::vector<std::uint64_t>& state) override {
    inner_->set_random_state(state);
  }
  void use_keras2_definitions() override {
    if (auto* definitions = keras_two_definitions_of(*inner_))
      definitions->use_keras2_definitions();
  }

  /// The wrapped layer (borrowed from this one).
  Layer& inner() { return *inner_; }
  const Layer& inner() const { return *inner_; }

 protected:
  std::unique_ptr<Layer> inner_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
