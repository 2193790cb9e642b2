#include "nn/integer_lookup.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

using nlohmann::json;

// float32 holds every integer exactly up to here: data values beyond it are no longer told apart.
constexpr std::int64_t kLargestExactInteger = std::int64_t{1} << 24;

std::string joined(const std::vector<std::int64_t>& values) {
  std::string out;
  for (std::int64_t v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

// An integer token at `path`: a whole number within ±2^24.
std::int64_t read_token(const json& v, const std::string& path) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) ||
      v.get<double>() != std::floor(v.get<double>()))
    throw ConfigError(path, "expected an integer, got " + v.dump());
  const double d = v.get<double>();
  if (std::fabs(d) > static_cast<double>(kLargestExactInteger))
    throw ConfigError(path, v.dump() +
                                " is beyond ±2^24 (16777216): Tandem's data are float32, which "
                                "tells integers apart only up to there");
  return static_cast<std::int64_t>(d);
}

std::optional<std::int64_t> read_optional_token(ConfigObject& c, const char* key,
                                                std::optional<std::int64_t> fallback) {
  if (!c.given(key)) return fallback;
  const json* v = c.find(key);
  if (!v) return std::nullopt;
  return read_token(*v, c.path_of(key));
}

}  // namespace

IntegerLookup::IntegerLookup(std::string name, IntegerLookupSettings settings)
    : Layer(std::move(name)), settings_(std::move(settings)) {
  const std::string& m = settings_.output_mode;
  if (m != "int")
    mode_ = m == "one_hot"     ? CategoryMode::one_hot
            : m == "multi_hot" ? CategoryMode::multi_hot
                               : CategoryMode::count;  // count and tf_idf
  // Keras: special tokens leading the vocabulary in its order are the layer's own, not tokens.
  const std::int64_t start = token_start();
  std::vector<std::int64_t> specials(static_cast<std::size_t>(oov_start()),
                                     settings_.mask_token.value_or(0));
  specials.insert(specials.end(), static_cast<std::size_t>(settings_.num_oov_indices),
                  settings_.oov_token);
  const auto& v = settings_.vocabulary;
  leading_specials_ = static_cast<std::int64_t>(v.size()) >= start &&
                      std::equal(specials.begin(), specials.end(), v.begin());
  tokens_.assign(v.begin() + (leading_specials_ ? start : 0), v.end());
  depth_ = settings_.pad_to_max_tokens ? *settings_.max_tokens
                                       : start + static_cast<std::int64_t>(tokens_.size());
  make_table();
}

std::int64_t IntegerLookup::oov_start() const {
  return settings_.mask_token && settings_.output_mode == "int" ? 1 : 0;
}

// The lookup table by ascending key. Forward: each token to its index, the mask token to 0
// ("int") or to depth_, an index the encoding drops; other values to the OOV indices. Inverted:
// each index to its token, 0 to the mask token; any other index to oov_token.
void IntegerLookup::make_table() {
  std::vector<std::pair<float, float>> rows;
  const std::int64_t start = token_start();
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const auto token = static_cast<float>(tokens_[i]);
    const auto index = static_cast<float>(start + static_cast<std::int64_t>(i));
    rows.emplace_back(settings_.invert ? index : token, settings_.invert ? token : index);
  }
  if (settings_.mask_token) {
    const auto mask = static_cast<float>(*settings_.mask_token);
    if (settings_.invert)
      rows.emplace_back(0.0f, mask);
    else
      rows.emplace_back(mask, mode_ ? static_cast<float>(depth_) : 0.0f);
  }
  std::sort(rows.begin(), rows.end());
  keys_.clear();
  values_.clear();
  for (const auto& [key, value] : rows) {
    keys_.push_back(key);
    values_.push_back(value);
  }
  desc_ = {};
  if (settings_.invert) {
    desc_.missing = static_cast<float>(settings_.oov_token);
  } else if (settings_.num_oov_indices == 0) {
    desc_.missing = -1.0f;
    desc_.refuse_missing = true;
  } else if (settings_.num_oov_indices == 1) {
    desc_.missing = static_cast<float>(oov_start());
  } else {
    desc_.buckets = settings_.num_oov_indices;
    desc_.bucket_start = static_cast<float>(oov_start());
  }
  // tf_idf's weights over the depth: the given ones, after the average for the special indices
  // they leave out, and zeros up to max_tokens (Keras' set_vocabulary).
  idf_.clear();
  if (settings_.output_mode != "tf_idf") return;
  const std::vector<double>& given = *settings_.idf_weights;
  const double average = given.empty() ? 0.0
                                       : std::accumulate(given.begin(), given.end(), 0.0) /
                                             static_cast<double>(given.size());
  if (!leading_specials_) idf_.assign(static_cast<std::size_t>(start), static_cast<float>(average));
  for (double w : given) idf_.push_back(static_cast<float>(w));
  idf_.resize(static_cast<std::size_t>(depth_), 0.0f);
}

Shape IntegerLookup::build(const Shape& input_shape, Rng&) {
  input_shape_ = input_shape;
  placed_keys_ = placed_values_ = placed_idf_ = Tensor();
  if (!mode_) return input_shape;
  geometry_ = category_geometry(input_shape, *mode_, depth_);
  return geometry_.output;
}

const Tensor& IntegerLookup::forward(const Tensor& x, bool) {
  const std::string label = "layer '" + name() + "' (IntegerLookup)";
  require_batch_of(x, input_shape_, label);
  const auto n = static_cast<std::int64_t>(keys_.size());
  if (placed_keys_.size() != n || placed_keys_.memory() != ops().memory()) {
    ops().copy(Tensor::from_vector({n}, keys_), ops().place(placed_keys_, {n}));
    ops().copy(Tensor::from_vector({n}, values_), ops().place(placed_values_, {n}));
    if (!idf_.empty())
      ops().copy(Tensor::from_vector({depth_}, idf_), ops().place(placed_idf_, {depth_}));
  }
  Tensor& indices = mode_ ? indices_ : output_;
  if (const auto missing =
          ops().lookup(desc_, x, placed_keys_, placed_values_, ops().place(indices, x.shape())))
    throw DataError(label + ": " + input_value_place(input_shape_, *missing, sample_offset()) +
                    " is not in the vocabulary, and num_oov_indices is 0 (Keras raises the "
                    "same; give num_oov_indices 1 to map such values to an index of their own)");
  if (!mode_) return output_;
  if (!settings_.mask_token) {
    encode_categories(ops(), indices_, input_shape_, geometry_, depth_, *mode_, output_, name(),
                      "IntegerLookup", sample_offset());
  } else {
    // A masked value is index depth_: encoded one column wider, that column left out.
    const CategoryGeometry wide = category_geometry(input_shape_, *mode_, depth_ + 1);
    encode_categories(ops(), indices_, input_shape_, wide, depth_ + 1, *mode_, encoded_, name(),
                      "IntegerLookup", sample_offset());
    Shape out{x.dim(0)};
    out.insert(out.end(), geometry_.output.begin(), geometry_.output.end());
    ops().copy_columns(encoded_, depth_ + 1, 0, ops().place(output_, out), depth_, 0, depth_);
  }
  if (!idf_.empty()) ops().column_affine(output_, placed_idf_, nullptr, output_, depth_);
  return output_;
}

const Tensor& IntegerLookup::backward(const Tensor&, bool need_input_grad) {
  return no_input_gradient(ops(), output_.dim(0), input_shape_, need_input_grad, grad_input_);
}

json IntegerLookup::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"invert", settings_.invert},
          {"max_tokens", settings_.max_tokens ? json(*settings_.max_tokens) : json()},
          {"num_oov_indices", settings_.num_oov_indices},
          {"oov_token", settings_.oov_token},
          {"mask_token", settings_.mask_token ? json(*settings_.mask_token) : json()},
          {"output_mode", settings_.output_mode},
          {"sparse", false},
          {"pad_to_max_tokens", settings_.pad_to_max_tokens},
          {"vocabulary_dtype", "int64"},
          {"idf_weights", settings_.idf_weights ? json(*settings_.idf_weights) : json()},
          {"vocabulary", settings_.vocabulary},
          {"vocabulary_size", vocabulary_size()}};
}

std::unique_ptr<Layer> make_integer_lookup(ConfigObject& c, const std::string& name) {
  IntegerLookupSettings s;
  std::string mode = c.get_string("output_mode", "int");
  if (mode == "binary") mode = "multi_hot";  // Keras' older names
  if (mode == "tf-idf") mode = "tf_idf";
  const std::vector<std::string> modes = {"int", "one_hot", "multi_hot", "count", "tf_idf"};
  if (std::find(modes.begin(), modes.end(), mode) == modes.end())
    throw ConfigError(c.path_of("output_mode"),
                      "expected one of int, one_hot, multi_hot, count, tf_idf, got '" + mode + "'");
  s.output_mode = mode;
  if (c.get_bool("sparse", false))
    throw ConfigError(c.path_of("sparse"), "Tandem's tensors are dense: sparse must be false");
  const std::string dtype = c.get_string("vocabulary_dtype", "int64");
  if (dtype != "int64")
    throw ConfigError(
        c.path_of("vocabulary_dtype"),
        "expected 'int64' (Keras' IntegerLookup takes no other), got '" + dtype + "'");
  s.invert = c.get_bool("invert", false);
  if (s.invert && mode != "int")
    throw ConfigError(c.path_of("invert"),
                      "inverts indices to values, which takes output_mode "
                      "'int', not '" +
                          mode + "'");
  if (c.has("max_tokens")) {
    s.max_tokens = c.positive_int("max_tokens");
    if (*s.max_tokens <= 1)
      throw ConfigError(c.path_of("max_tokens"), "must be greater than 1 (Keras' rule), got 1");
  }
  s.num_oov_indices = c.int_in("num_oov_indices", 1, 0, kLargestExactInteger);
  s.mask_token = read_optional_token(c, "mask_token", std::nullopt);
  s.oov_token = read_optional_token(c, "oov_token", -1).value_or(-1);
  s.pad_to_max_tokens = c.get_bool("pad_to_max_tokens", false);
  if (s.pad_to_max_tokens && !s.max_tokens)
    throw ConfigError(c.path_of("pad_to_max_tokens"), "pads to max_tokens, which is not set");

  const json* vocabulary = c.find("vocabulary");
  if (!vocabulary)
    throw ConfigError(c.path_of("vocabulary"),
                      "null: the vocabulary is Keras' adapt()'s to compute, which Tandem does "
                      "not do; give it as a list of integers");
  if (!vocabulary->is_array() || vocabulary->empty())
    throw ConfigError(c.path_of("vocabulary"),
                      "expected a non-empty list of integers (a vocabulary file is not read: "
                      "give its values), got " +
                          vocabulary->dump());
  for (std::size_t i = 0; i < vocabulary->size(); ++i)
    s.vocabulary.push_back(
        read_token((*vocabulary)[i], c.path_of("vocabulary") + "[" + std::to_string(i) + "]"));

  if (c.has("idf_weights")) {
    if (mode != "tf_idf")
      throw ConfigError(c.path_of("idf_weights"),
                        "weighs tf_idf's counts, and output_mode is '" + mode + "'");
    const json& w = c.at("idf_weights");
    if (!w.is_array() || w.size() != vocabulary->size())
      throw ConfigError(c.path_of("idf_weights"),
                        "expected a list of " + std::to_string(vocabulary->size()) +
                            " numbers, one per vocabulary entry, got " + w.dump());
    std::vector<double> weights;
    for (const json& v : w) {
      if (!v.is_number() || !std::isfinite(v.get<double>()))
        throw ConfigError(c.path_of("idf_weights"), "expected finite numbers, got " + v.dump());
      weights.push_back(v.get<double>());
    }
    s.idf_weights = std::move(weights);
  } else if (mode == "tf_idf") {
    throw ConfigError(c.path_of("idf_weights"),
                      "required with output_mode 'tf_idf' and a given vocabulary (Keras' rule)");
  }
  const json* declared_size = c.find("vocabulary_size");
  c.ignore({"dtype"});

  auto layer = std::make_unique<IntegerLookup>(name, s);
  const std::int64_t size = layer->vocabulary_size();
  // The tokens (the vocabulary less any leading special tokens): distinct, no mask or OOV token.
  std::set<std::int64_t> seen, repeated;
  for (std::int64_t t : layer->tokens())
    if (!seen.insert(t).second) repeated.insert(t);
  if (!repeated.empty())
    throw ConfigError(c.path_of("vocabulary"), "repeats " +
                                                   joined({repeated.begin(), repeated.end()}) +
                                                   ": each value must be listed once");
  if (s.mask_token && seen.count(*s.mask_token))
    throw ConfigError(c.path_of("vocabulary"),
                      "holds the mask token " + std::to_string(*s.mask_token) +
                          " among its values; leave it out, or lead the vocabulary with the "
                          "special tokens in Keras' order (mask, then the OOV tokens)");
  if (s.invert && seen.count(s.oov_token))
    throw ConfigError(c.path_of("vocabulary"),
                      "holds the OOV token " + std::to_string(s.oov_token) +
                          ", which an inverted lookup returns for unknown indices");
  if (s.max_tokens && size > *s.max_tokens)
    throw ConfigError(c.path_of("vocabulary"), "makes " + std::to_string(size) +
                                                   " indices with the special ones, more "
                                                   "than max_tokens " +
                                                   std::to_string(*s.max_tokens));
  if (declared_size &&
      (!declared_size->is_number_integer() || declared_size->get<std::int64_t>() != size))
    throw ConfigError(c.path_of("vocabulary_size"),
                      declared_size->dump() + ", but the vocabulary makes " + std::to_string(size) +
                          " indices with the special ones");
  return layer;
}

}  // namespace tandem::nn
