// Synthetic data: sample i is generated on demand from Rng(Rng::derive(seed, i)), so nothing is
// stored and any sample reads the same whatever the order or batch it is read in.
#include <cstdint>
#include <sstream>
#include <vector>

#include "data/datasets.hpp"
#include "tandem/error.hpp"
#include "tandem/rng.hpp"
#include "util/uniform_rows.hpp"

namespace tandem::data {

namespace {

const char* task_name(SyntheticTask task) {
  switch (task) {
    case SyntheticTask::binary:
      return "binary";
    case SyntheticTask::classes:
      return "classes";
    case SyntheticTask::repeated_token:
      return "repeated_token";
    case SyntheticTask::sentence_pair:
      return "sentence_pair";
    default:
      return "regression";
  }
}

class SyntheticDataset final : public Dataset {
 public:
  explicit SyntheticDataset(SyntheticSpec spec)
      : s_(std::move(spec)), x_row_(shape_size(x_shape())), y_row_(shape_size(s_.y_shape)) {}

  std::int64_t size() const override { return s_.samples; }
  // A sentence pair is two arrays per sample, packed: the tokens, then their segment ids.
  Shape x_shape() const override {
    return pair() ? Shape{2 * s_.x_shape[0]} : s_.x_shape;
  }
  std::vector<Shape> x_parts() const override {
    return pair() ? std::vector<Shape>{s_.x_shape, s_.x_shape} : std::vector<Shape>{s_.x_shape};
  }
  Shape y_shape() const override { return s_.y_shape; }

  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    std::vector<Rng> rngs;
    rngs.reserve(indices.size());
    for (const std::int64_t i : indices) {
      if (i < 0 || i >= s_.samples)
        throw DataError("synthetic dataset: sample " + std::to_string(i) + " out of range (" +
                        std::to_string(s_.samples) + " samples)");
      rngs.emplace_back(Rng::derive(s_.seed, static_cast<std::uint64_t>(i)));
    }
    const bool tokens = s_.task == SyntheticTask::repeated_token || pair();
    // The uniform x rows of all samples at once (each from its own stream, as one by one).
    if (!tokens) fill_uniform_rows(rngs, x, x_row_, x_row_);
    for (std::size_t k = 0; k < rngs.size(); ++k) {
      Rng& rng = rngs[k];
      float* xr = x + static_cast<std::int64_t>(k) * x_row_;
      float* yr = y + static_cast<std::int64_t>(k) * y_row_;
      if (s_.task == SyntheticTask::repeated_token) {
        repeated_token_sample(rng, xr, yr);
        continue;
      }
      if (pair()) {
        sentence_pair_sample(rng, xr, yr);
        continue;
      }
      for (std::int64_t e = 0; e < y_row_; ++e) {
        switch (s_.task) {
          case SyntheticTask::binary:
            yr[e] = static_cast<float>(rng.below(2));
            break;
          case SyntheticTask::classes:
            yr[e] = static_cast<float>(rng.below(static_cast<std::uint64_t>(s_.classes)));
            break;
          default:
            yr[e] = rng.uniform();
            break;
        }
      }
    }
  }

  // `length` token ids in [1, vocabulary): a random first one, then ones that all differ from
  // it. Returns the first.
  std::uint64_t draw_tokens(Rng& rng, float* x, std::int64_t length) const {
    const auto others = static_cast<std::uint64_t>(s_.vocabulary - 2);  // ids but 0 and first
    const std::uint64_t first = 1 + rng.below(static_cast<std::uint64_t>(s_.vocabulary - 1));
    x[0] = static_cast<float>(first);
    for (std::int64_t t = 1; t < length; ++t) {
      std::uint64_t token = 1 + rng.below(others);
      if (token >= first) ++token;
      x[t] = static_cast<float>(token);
    }
    return first;
  }

  // A sequence whose first token is repeated later (y = 1) or not (y = 0): every other
  // token differs from the first; a repeat, when drawn, goes to one random later position.
  void repeated_token_sample(Rng& rng, float* x, float* y) const {
    const bool repeated = rng.below(2) == 1;
    const std::uint64_t first = draw_tokens(rng, x, x_row_);
    if (repeated)
      x[1 + rng.below(static_cast<std::uint64_t>(x_row_ - 1))] = static_cast<float>(first);
    y[0] = repeated ? 1.0f : 0.0f;
  }

  // Segment A (segment id 0) is positions [0, split), segment B (id 1) the rest, split at
  // random with at least two tokens in each. y = 1 when A's first token appears in B; half the
  // samples also repeat it inside A, which does not count: telling the two apart takes the
  // segment ids. Every other token differs from the first.
  void sentence_pair_sample(Rng& rng, float* x, float* y) const {
    const std::int64_t length = s_.x_shape[0];
    const auto split = 2 + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(length - 3)));
    const bool in_b = rng.below(2) == 1, in_a = rng.below(2) == 1;
    const std::uint64_t first = draw_tokens(rng, x, length);
    if (in_a) x[1 + rng.below(static_cast<std::uint64_t>(split - 1))] = static_cast<float>(first);
    if (in_b)
      x[split + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(length - split)))] =
          static_cast<float>(first);
    for (std::int64_t t = 0; t < length; ++t) x[length + t] = t < split ? 0.0f : 1.0f;
    y[0] = in_b ? 1.0f : 0.0f;
  }

  bool pair() const { return s_.task == SyntheticTask::sentence_pair; }

  std::string describe() const override {
    std::ostringstream out;
    out << "synthetic: " << s_.samples << " samples, x " << shape_to_string(s_.x_shape) << ", "
        << task_name(s_.task);
    if (s_.task == SyntheticTask::classes) out << " (" << s_.classes << " classes)";
    if (s_.vocabulary > 0) out << " (vocabulary " << s_.vocabulary << ")";
    out << " y " << shape_to_string(s_.y_shape) << ", seed " << s_.seed;
    return out.str();
  }

 private:
  SyntheticSpec s_;
  std::int64_t x_row_;
  std::int64_t y_row_;
};

Shape positive_shape(ConfigObject& spec, const std::string& key, bool allow_empty) {
  Shape shape;
  const auto list = spec.get_int_list(key, false);
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (*list[i] <= 0)
      throw ConfigError(spec.path_of(key) + "[" + std::to_string(i) + "]",
                        "expected a positive dimension, got " + std::to_string(*list[i]));
    shape.push_back(*list[i]);
  }
  if (shape.empty() && !allow_empty)
    throw ConfigError(spec.path_of(key), "expected at least one dimension, got []");
  return shape;
}

}  // namespace

SyntheticSpec parse_synthetic_spec(ConfigObject& spec) {
  SyntheticSpec s;
  // Each epoch's sample order is held in memory (8 bytes a sample): up to 2^31 - 1 samples.
  s.samples = spec.int_in("samples", 1, 1, INT32_MAX);
  s.x_shape = positive_shape(spec, "x_shape", false);
  const std::string task = spec.one_of(
      "task", "binary", {"binary", "classes", "regression", "repeated_token", "sentence_pair"});
  s.task = task == "binary"           ? SyntheticTask::binary
           : task == "classes"        ? SyntheticTask::classes
           : task == "repeated_token" ? SyntheticTask::repeated_token
           : task == "sentence_pair"  ? SyntheticTask::sentence_pair
                                      : SyntheticTask::regression;
  const bool tokens =
      s.task == SyntheticTask::repeated_token || s.task == SyntheticTask::sentence_pair;
  if (tokens) {
    const std::int64_t shortest = s.task == SyntheticTask::sentence_pair ? 4 : 2;
    if (s.x_shape.size() != 1 || s.x_shape[0] < shortest)
      throw ConfigError(spec.path_of("x_shape"),
                        "task '" + task + "' takes a sequence: x_shape [length], length >= " +
                            std::to_string(shortest) + ", got " + shape_to_string(s.x_shape));
    s.vocabulary = spec.positive_int("vocabulary");
    if (s.vocabulary < 3 || s.vocabulary > (1 << 24))
      throw ConfigError(spec.path_of("vocabulary"),
                        "expected a vocabulary of 3 to 2^24 token ids, got " +
                            std::to_string(s.vocabulary));
  } else if (spec.has("vocabulary")) {
    throw ConfigError(spec.path_of("vocabulary"),
                      "only used with \"task\": \"repeated_token\" or \"sentence_pair\"");
  }
  spec.ignore({"vocabulary"});
  if (s.task == SyntheticTask::classes) {
    s.classes = spec.positive_int("classes", 10);
    if (s.classes < 2)
      throw ConfigError(spec.path_of("classes"),
                        "expected at least 2 classes, got " + std::to_string(s.classes));
    if (spec.has("y_shape") && !positive_shape(spec, "y_shape", true).empty())
      throw ConfigError(spec.path_of("y_shape"),
                        "task 'classes' has a scalar class index per sample: y_shape must be []");
    spec.ignore({"y_shape"});
  } else {
    if (spec.has("classes"))
      throw ConfigError(spec.path_of("classes"), "only used with \"task\": \"classes\"");
    s.y_shape = spec.has("y_shape") ? positive_shape(spec, "y_shape", true) : Shape{1};
    if (tokens && s.y_shape != Shape{1})
      throw ConfigError(spec.path_of("y_shape"), "task '" + task +
                                                     "' has one 0/1 label per sample: y_shape "
                                                     "must be [1]");
    spec.ignore({"y_shape", "classes"});
  }
  const std::int64_t seed = spec.get_int("seed", 0);
  if (seed < 0)
    throw ConfigError(spec.path_of("seed"),
                      "expected a non-negative integer, got " + std::to_string(seed));
  s.seed = static_cast<std::uint64_t>(seed);
  return s;
}

std::shared_ptr<Dataset> make_synthetic_dataset(const SyntheticSpec& spec) {
  if (spec.samples < 0) throw DataError("synthetic dataset: negative sample count");
  return std::make_shared<SyntheticDataset>(spec);
}

}  // namespace tandem::data
