#include "nn/sequence_masks.hpp"

#include <set>

#include "backend/ops.hpp"
#include "nn/function_layers.hpp"
#include "nn/layer_extensions.hpp"
#include "nn/merge.hpp"
#include "nn/time_distributed.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

// Keras' layers that support masking with the default compute_mask, working step by step:
// the mask of their input is their output's (the same in Keras 2 and 3).
const std::set<std::string>& passing() {
  static const std::set<std::string> classes{"Dense",
                                             "Activation",
                                             "Dropout",
                                             "SpatialDropout1D",
                                             "GaussianNoise",
                                             "GaussianDropout",
                                             "AlphaDropout",
                                             "LayerNormalization",
                                             "GroupNormalization",
                                             "ReLU",
                                             "LeakyReLU",
                                             "PReLU",
                                             "ELU",
                                             "Identity",
                                             "UnitNormalization",
                                             "ActivityRegularization"};
  return classes;
}

// Keras 3's layers that pass masks on (supports_masking) where tf.keras 2's drop them.
const std::set<std::string>& passing_in_keras3() {
  static const std::set<std::string> classes{"Rescaling", "Normalization"};
  return classes;
}

// Keras' merging layers that combine their inputs' masks.
const std::set<std::string>& merging() {
  static const std::set<std::string> classes{"Add",     "Subtract", "Multiply",
                                             "Average", "Maximum",  "Minimum"};
  return classes;
}

// Keras' layers without mask support, which Keras 3 gives no mask (warning that it drops it)
// and tf.keras 2 neither (silently): the mask ends there. Dot supports masks but gives none.
// (RMSNormalization, the adaptive poolings, SpectralNormalization and keras_hub's
// PositionEmbedding are Keras 3's alone.)
const std::set<std::string>& dropping() {
  static const std::set<std::string> classes{"Conv1D",
                                             "Conv2D",
                                             "DepthwiseConv2D",
                                             "SeparableConv2D",
                                             "Conv2DTranspose",
                                             "Flatten",
                                             "Reshape",
                                             "MaxPooling1D",
                                             "AveragePooling1D",
                                             "MaxPooling2D",
                                             "AveragePooling2D",
                                             "GlobalMaxPooling2D",
                                             "GlobalAveragePooling2D",
                                             "ZeroPadding2D",
                                             "Cropping2D",
                                             "UpSampling2D",
                                             "ZeroPadding1D",
                                             "Cropping1D",
                                             "UpSampling1D",
                                             "Conv1DTranspose",
                                             "DepthwiseConv1D",
                                             "SeparableConv1D",
                                             "Resizing",
                                             "CenterCrop",
                                             "RMSNormalization",
                                             "AdaptiveAveragePooling1D",
                                             "AdaptiveMaxPooling1D",
                                             "SpectralNormalization",
                                             "EinsumDense",
                                             "PositionEmbedding",
                                             "GlobalMaxPooling1D",
                                             "Permute",
                                             "RepeatVector",
                                             "Discretization",
                                             "CategoryEncoding",
                                             "IntegerLookup",
                                             "Dot"};
  return classes;
}

// A TimeDistributed keeps its input's mask (Keras' supports_masking), unless the layer it wraps
// reads masks (Keras would give it each step's: a mask of the batch alone).
bool passes_through(Layer& layer) {
  auto* wrapper = dynamic_cast<TimeDistributed*>(&layer);
  return wrapper && !masked_steps_of(wrapper->inner());
}

// How a Concatenate joins masked sequences (batch, steps, features): side by side along the
// features, or one after the other along the steps. Keras would give a mask of another shape
// for other inputs (its masks broadcast to the inputs, joined, reduced over the last axis).
bool joins_steps(const Concatenate& layer, const std::string& path) {
  if (layer.input_rank() != 2)
    throw ConfigError(path, "layer '" + layer.name() +
                                "' (Concatenate) joins masked inputs of " +
                                std::to_string(layer.input_rank()) +
                                " axes per sample; Tandem joins the masks of sequences (batch, "
                                "steps, features), along the steps or the features");
  return layer.joined_axis() == 0;
}

}  // namespace

std::unique_ptr<SequenceMasks> SequenceMasks::plan(const std::vector<MaskedCall>& calls,
                                                   bool keras2,
                                                   const std::vector<std::string>& paths) {
  std::vector<Use> uses(calls.size(), Use::none);
  std::vector<bool> masked(calls.size(), false), inputs_masked(calls.size(), false);
  bool any = false;
  for (std::size_t k = 0; k < calls.size(); ++k) {
    Layer& layer = *calls[k].runner;
    std::size_t given = 0;
    for (int in : calls[k].inputs) given += in >= 0 && masked[static_cast<std::size_t>(in)];
    const bool first = !calls[k].inputs.empty() && calls[k].inputs[0] >= 0 &&
                       masked[static_cast<std::size_t>(calls[k].inputs[0])];
    inputs_masked[k] = given > 0;
    const std::string cls = layer.class_name();
    if (!calls[k].function.empty() && given > 0)
      throw ConfigError(
          paths[k],
          "layer '" + layer.name() + "' (" + calls[k].function + ", run as " + cls +
              ") receives a mask (the padding steps Embedding's mask_zero or a Masking layer "
              "leaves out), which Tandem does not take through a function called on a Keras "
              "tensor" +
              (is_tandem_layer(cls)  // Tandem's own layer: no Keras one computes it
                   ? std::string()
                   : "; write it as Keras' " + cls +
                         " layer, which takes masks as docs/config.md says"));
    if (MaskedSteps* own = masked_steps_of(layer)) {
      uses[k] = Use::own;
      masked[k] = own->output_masked(first);
    } else if (given == 0 || dropping().count(cls) || (keras2 && passing_in_keras3().count(cls))) {
      uses[k] = Use::none;
    } else if (passing().count(cls) || passing_in_keras3().count(cls) || passes_through(layer)) {
      uses[k] = Use::pass;
      masked[k] = first;
    } else if (merging().count(cls)) {
      uses[k] = Use::merge;
      masked[k] = keras2 || given == calls[k].inputs.size();
    } else if (const auto* join = dynamic_cast<const Concatenate*>(&layer)) {
      uses[k] = joins_steps(*join, paths[k]) ? Use::join_steps : Use::join_features;
      masked[k] = true;
    } else {
      throw ConfigError(paths[k],
                        "layer '" + layer.name() + "' (" + cls +
                            ") receives a mask (the padding steps Embedding's mask_zero or a "
                            "Masking layer leaves out), which Keras applies in this layer and "
                            "Tandem does not yet; Tandem takes masks through the recurrent "
                            "layers and the layers that work step by step (docs/config.md, "
                            "masks)");
    }
    any = any || masked[k];
  }
  if (!any) return nullptr;
  return std::unique_ptr<SequenceMasks>(new SequenceMasks(
      calls, std::move(uses), std::move(inputs_masked), std::move(masked), keras2));
}

const Tensor* SequenceMasks::input_mask(std::size_t k, std::size_t i) const {
  const int in = calls_[k].inputs[i];
  return in >= 0 ? masks_[static_cast<std::size_t>(in)] : nullptr;
}

void SequenceMasks::before(std::size_t k) {
  if (uses_[k] != Use::own) return;
  std::vector<const Tensor*> masks;
  for (std::size_t i = 0; i < calls_[k].inputs.size(); ++i) masks.push_back(input_mask(k, i));
  masked_steps_of(*calls_[k].runner)->set_input_masks(masks);
}

void SequenceMasks::after(std::size_t k) {
  switch (uses_[k]) {
    case Use::none:
      masks_[k] = nullptr;
      break;
    case Use::pass:
      masks_[k] = input_mask(k, 0);
      break;
    case Use::merge:
      merge(k);
      break;
    case Use::join_features:
      // Keras 2: the AND of the masks given, as a merge; Keras 3: any input's step kept keeps
      // it (ops.any over the joined masks), so an input without a mask keeps every step.
      if (keras2_ || all_given(k)) {
        merge(k);
      } else {
        const Tensor& first = *given_masks(k)[0];
        calls_[k].runner->ops().fill(calls_[k].runner->ops().place(merged_[k], first.shape()), 1);
        masks_[k] = &merged_[k];
      }
      break;
    case Use::join_steps:
      join_steps(k);
      break;
    case Use::own:
      masks_[k] = masked_steps_of(*calls_[k].runner)->output_mask();
      break;
  }
}

std::vector<const Tensor*> SequenceMasks::given_masks(std::size_t k) const {
  std::vector<const Tensor*> given;
  for (std::size_t i = 0; i < calls_[k].inputs.size(); ++i)
    if (const Tensor* m = input_mask(k, i)) given.push_back(m);
  return given;
}

bool SequenceMasks::all_given(std::size_t k) const {
  return given_masks(k).size() == calls_[k].inputs.size();
}

// Keras 2: the AND of the masks given (a product of 0/1 values); Keras 3: none unless every
// input has one, then their OR (a + b − a·b).
void SequenceMasks::merge(std::size_t k) {
  backend::Backend& ops = calls_[k].runner->ops();
  const std::vector<const Tensor*> given = given_masks(k);
  if (given.empty() || (!keras2_ && given.size() < calls_[k].inputs.size())) {
    masks_[k] = nullptr;
    return;
  }
  Tensor& out = ops.place(merged_[k], given[0]->shape());
  ops.copy(*given[0], out);
  for (std::size_t i = 1; i < given.size(); ++i) {
    if (keras2_) {
      ops.multiply(out, *given[i], out);
      continue;
    }
    Tensor& both = ops.place(scratch_[k], out.shape());
    ops.multiply(out, *given[i], both);
    ops.add(out, *given[i], out);
    ops.subtract(out, both, out);
  }
  masks_[k] = &out;
}

// Sequences one after the other: their masks one after the other, an input without a mask
// keeping all its steps (Keras 2 and 3 alike).
void SequenceMasks::join_steps(std::size_t k) {
  backend::Backend& ops = calls_[k].runner->ops();
  const auto& join = static_cast<const Concatenate&>(*calls_[k].runner);
  const std::vector<const Tensor*> given = given_masks(k);
  const std::int64_t rows = given[0]->dim(0);
  std::int64_t steps = 0;
  for (std::size_t i = 0; i < calls_[k].inputs.size(); ++i) steps += join.input_length(i);
  Tensor& out = ops.place(merged_[k], {rows, steps});
  if (given.size() < calls_[k].inputs.size()) ops.fill(out, 1);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < calls_[k].inputs.size(); ++i) {
    const std::int64_t length = join.input_length(i);
    if (const Tensor* m = input_mask(k, i))
      ops.copy_columns(*m, length, 0, out, steps, offset, length);
    offset += length;
  }
  masks_[k] = &out;
}

}  // namespace tandem::nn
