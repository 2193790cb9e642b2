// Private (nn): Keras' EinsumDense equation ("abc,cd->abd": the input's axes, the kernel's, the
// output's; "...b,bc->...c" and "ab...,bc->ac..." with an ellipsis for axes passed through) read
// as Keras' _analyze_einsum_string reads it, and turned into the products Tandem computes: the
// input arranged as [S, M, K], the kernel as [S, K, N], a batch of S GEMMs giving [S, M, N],
// arranged into the output. S: axes of all three (a product per index), M: the input's axes the
// output keeps (the batch's among them), K: the axes summed (the input's and the kernel's), N:
// the kernel's axes the output adds. Plain values and functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// An equation's three specs as Keras splits them: `input`, `kernel`, `output` letters, and where
/// the ellipsis stands (on the left of the input and the output, on their right, or nowhere).
struct EinsumSpecs {
  enum class Ellipsis { none, left, right };
  std::string input, kernel, output;
  Ellipsis ellipsis = Ellipsis::none;
};

/// The equation's specs, or nullopt when it has none of Keras' three forms ("[X],[Y]->[Z]",
/// "...[X],[Y]->...[Z]", "[X]...,[Y]->[Z]..." with X of two letters or more).
std::optional<EinsumSpecs> split_einsum_equation(const std::string& equation);

/// What an EinsumDense computes for inputs of one per-sample shape. Every axis is a letter: the
/// specs' own, and for the axes an ellipsis stands for, digits.
struct EinsumPlan {
  std::string input_axes, kernel_axes, output_axes;  // the batch's letter first in input and output
  std::string smk, skn, smn;  // the products' arrangements: [S, M, K], [S, K, N], [S, M, N]
  char batch = 0;
  std::vector<std::pair<char, std::int64_t>> sizes;  // every letter's size but the batch's
  Shape kernel_shape;                                // in the kernel spec's order (Keras' weight)
  Shape output_shape;                                // per sample
  std::optional<Shape> bias_shape;  // Keras' bias weight: the output's last axes, 1 where broadcast
  // The bias arranged for adding: the per-sample output's letters as `broadcast` then `biased`.
  std::string broadcast, biased;
  std::int64_t s = 1, m_per_sample = 1, k = 1, n = 1;  // the GEMMs: M = rows · m_per_sample

  /// The sizes of `letters` (the batch's: rows).
  Shape dims(const std::string& letters, std::int64_t rows) const;
};

/// order[i]: the index in `from` of the letter `to` has at i (permute_axes' order).
std::vector<int> axis_order(const std::string& from, const std::string& to);

/// What Keras or Tandem refuses in `specs` and `bias_axes` whatever the inputs (a letter twice in
/// one spec, a letter no operand sizes, one summed over the input alone, the batch axis moved or
/// in the kernel, a bias letter the output lacks), or nullopt.
std::optional<std::string> einsum_spec_problem(const EinsumSpecs& specs,
                                               const std::optional<std::string>& bias_axes);

/// The plan of `specs` for per-sample inputs `input_shape`, `partial_output` being Keras'
/// output_shape (the output's axes after the batch, null where the input gives the size) and
/// `bias_axes` the output letters a bias has (nullopt: none). Throws ShapeError "<who> ..."
/// naming what does not fit: an input of another rank, a size the output shape contradicts, a
/// letter no operand sizes, a letter summed over the input alone, the batch axis moved.
EinsumPlan plan_einsum(const EinsumSpecs& specs, const Shape& input_shape,
                       const std::vector<std::optional<std::int64_t>>& partial_output,
                       const std::optional<std::string>& bias_axes, const std::string& who);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
