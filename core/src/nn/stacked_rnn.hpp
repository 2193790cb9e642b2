// Keras' RNN over StackedRNNCells (`RNN([LSTMCell(8), GRUCell(4)])`): per step each cell takes
// the output of the cell before it, the RNN's output is the last cell's. Computed as the cells'
// own layers one after the other over the whole sequence (nn::Recurrent, each over every step
// but the last, which returns what the RNN returns): the same outputs, as each cell's step reads
// only the step's output of the cell below. With go_backwards the first layer reads the steps in
// reverse and the others read its outputs as they come (Keras' processing order), a mask in that
// order too; a masked step keeps every cell's states, as the stacked cell does.
//
// Weights: each cell's, in order, named "stacked_rnn_cells/<cell>/kernel" as Keras 2 names them.
// The final states (return_state) and given initial states are refused by the registry. Ownership
// and threads: as every layer's (tandem/layer.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/layer_extensions.hpp"
#include "nn/recurrent.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class StackedRnn : public Layer,
                   public WeightRules,
                   public KerasTwoDefinitions,
                   public MaskedSteps {
 public:
  /// `cells`: the cells' layers (RecurrentOptions::rnn_cell naming each), the first with the
  /// RNN's go_backwards, the last with its return_sequences and zero_output_for_mask, every
  /// other over every step forwards; `stack_name`: the StackedRNNCells' own name.
  StackedRnn(std::string name, std::vector<std::unique_ptr<Recurrent>> cells,
             std::string stack_name);
  std::string class_name() const override { return "RNN"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;
  std::vector<RuledWeight> ruled_weights() override;
  std::vector<std::uint64_t> random_state() const override;
  void set_random_state(const std::vector<std::uint64_t>& state) override;
  void use_keras2_definitions() override;
  bool output_masked(bool input_masked) const override {
    return cells_.back()->output_masked(input_masked);
  }
  void set_input_mask(const Tensor* mask) override { input_mask_ = mask; }
  const Tensor* output_mask() const override {
    return cells_.back()->output_mask() ? input_mask_ : nullptr;
  }
  /// The cells' classes in order ("LSTMCell"), as Keras 3 files name their weights' groups.
  std::vector<std::string> cell_classes() const;
  /// The cells' layers, first to last (the ONNX export writes each).
  const std::vector<std::unique_ptr<Recurrent>>& cells() const { return cells_; }

 private:
  std::vector<std::unique_ptr<Recurrent>> cells_;
  std::string stack_name_;
  std::int64_t steps_ = 0;
  const Tensor* input_mask_ = nullptr;  // borrowed until the next forward
  Tensor reversed_mask_;  // with go_backwards: the mask in processing order, for the cells after
                          // the first
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
