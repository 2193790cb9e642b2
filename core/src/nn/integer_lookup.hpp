// IntegerLookup, Keras 3 semantics: integer values to indices of a vocabulary, or back.
//
// Indices (output_mode "int"): the mask token, when set, is 0; then num_oov_indices indices
// for values outside the vocabulary (one: all of them; several: the value modulo their count,
// Keras' floormod; none: such a value is a DataError naming it); then the vocabulary in its
// order. The other modes encode those indices as CategoryEncoding does ("one_hot", "multi_hot",
// "count") over the vocabulary size (or max_tokens with pad_to_max_tokens), without a mask index
// — masked values count nowhere — and "tf_idf" is "count" times idf_weights. With `invert` the
// layer maps indices back to their values (the mask token at 0, oov_token for any other index).
// An input value is truncated toward zero, as Keras casts it to int64; a vocabulary is refused
// beyond ±2^24, where float32 data no longer tells integers apart.
//
// The vocabulary is the config's, as given (special tokens leading it, in Keras' order, are
// recognised and dropped); one still to be computed by adapt() (null) is refused. No weights;
// no gradient (zeros to the input). Ownership and threads: as every layer's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/kernel_math.hpp"
#include "nn/category_encoding.hpp"
#include "tandem/layer.hpp"
#include "util/config_object.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct IntegerLookupSettings {
  std::vector<std::int64_t> vocabulary;  // as given
  std::optional<std::int64_t> max_tokens;
  std::int64_t num_oov_indices = 1;
  std::optional<std::int64_t> mask_token;
  std::int64_t oov_token = -1;
  bool invert = false;
  std::string output_mode = "int";  // int, one_hot, multi_hot, count, tf_idf
  bool pad_to_max_tokens = false;
  std::optional<std::vector<double>> idf_weights;  // as given (tf_idf)
};

class IntegerLookup : public Layer {
 public:
  /// `settings` checked by make_integer_lookup.
  IntegerLookup(std::string name, IntegerLookupSettings settings);
  std::string class_name() const override { return "IntegerLookup"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

  /// The vocabulary without its leading special tokens, and the number of indices with them
  /// (Keras' vocabulary_size()).
  const std::vector<std::int64_t>& tokens() const { return tokens_; }
  std::int64_t vocabulary_size() const {
    return token_start() + static_cast<std::int64_t>(tokens_.size());
  }

  /// What forward() computes, for an exporter: the table (ascending keys and their values),
  /// what a key outside it gives, the encoded modes' depth (0 for "int"), their mode (none for
  /// "int"; "tf_idf" encodes as count) and tf_idf's weights over the depth (else empty). A masked
  /// value of an encoded mode looks up index depth(), which the encoding leaves out.
  const std::vector<float>& table_keys() const { return keys_; }
  const std::vector<float>& table_values() const { return values_; }
  const backend::math::LookupDesc& lookup_desc() const { return desc_; }
  std::int64_t depth() const { return mode_ ? depth_ : 0; }
  std::optional<CategoryMode> encoded_mode() const { return mode_; }
  const std::vector<float>& idf_weights() const { return idf_; }

 private:
  std::int64_t oov_start() const;
  std::int64_t token_start() const { return oov_start() + settings_.num_oov_indices; }
  void make_table();

  IntegerLookupSettings settings_;
  std::vector<std::int64_t> tokens_;  // the vocabulary without its leading special tokens
  bool leading_specials_ = false;     // the given vocabulary led with them
  std::int64_t depth_ = 0;            // the encoded modes' values per category axis
  std::optional<CategoryMode> mode_;  // none: "int" (and "tf_idf" encodes as count)
  Shape input_shape_;
  CategoryGeometry geometry_;
  backend::math::LookupDesc desc_;
  std::vector<float> keys_, values_;  // the table, by ascending key
  std::vector<float> idf_;            // tf_idf's weights over depth()
  Tensor placed_keys_, placed_values_, placed_idf_;
  Tensor indices_, encoded_, output_, grad_input_;
};

/// Reads an IntegerLookup config (Keras 3's keys), throwing ConfigError at its path.
std::unique_ptr<Layer> make_integer_lookup(ConfigObject& c, const std::string& name);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
