#include "train/adapt_normalization.hpp"

#include <algorithm>
#include <cstdint>

#include "nn/normalization.hpp"

namespace tandem {

namespace {

// The running mean and sum of squared deviations of one feature (Chan et al.'s pairwise update:
// each chunk's own two-pass figures, merged), in double.
struct FeatureMoments {
  std::int64_t count = 0;
  double mean = 0, squares = 0;

  void merge(std::int64_t n, double chunk_mean, double chunk_squares) {
    if (n == 0) return;
    const double total = static_cast<double>(count + n);
    const double delta = chunk_mean - mean;
    mean += delta * static_cast<double>(n) / total;
    squares +=
        chunk_squares + delta * delta * static_cast<double>(count) * static_cast<double>(n) / total;
    count += n;
  }
};

// A layer to adapt: where its input sits in a sample's packed row, and its features' moments.
struct AdaptTarget {
  nn::Normalization* layer = nullptr;
  std::int64_t offset = 0, values = 0, features = 0;  // per sample
  std::vector<FeatureMoments> moments;
};

// The call of layer `l` when it has exactly one, else -1.
std::int64_t single_call_of(const Model& model, std::size_t l) {
  std::int64_t found = -1;
  for (std::size_t k = 0; k < model.call_count(); ++k) {
    if (model.call_layer(k) != l) continue;
    if (found >= 0) return -1;
    found = static_cast<std::int64_t>(k);
  }
  return found;
}

// Folds `rows` samples of x (packed rows of `row` values) into the target's moments, reading the
// chunk in memory order (features innermost), twice: the chunk's means, then its squared
// deviations from them.
void add_chunk_moments(AdaptTarget& t, const float* x, std::int64_t rows, std::int64_t row) {
  const std::int64_t positions = t.values / t.features;
  const std::int64_t n = rows * positions;
  if (n == 0) return;
  const auto features = static_cast<std::size_t>(t.features);
  const auto each_value = [&](const auto& visit) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* sample = x + r * row + t.offset;
      for (std::int64_t p = 0; p < positions; ++p)
        for (std::size_t f = 0; f < features; ++f) visit(f, sample[p * t.features + f]);
    }
  };
  std::vector<double> means(features, 0.0), squares(features, 0.0);
  each_value([&](std::size_t f, double v) { means[f] += v; });
  for (double& m : means) m /= static_cast<double>(n);
  each_value([&](std::size_t f, double v) { squares[f] += (v - means[f]) * (v - means[f]); });
  for (std::size_t f = 0; f < features; ++f) t.moments[f].merge(n, means[f], squares[f]);
}

std::string normalization_label(const nn::Normalization& layer) {
  return "layer '" + layer.name() + "' (Normalization)";
}

}  // namespace

std::vector<AdaptNote> adapt_normalizations(Model& model, const Dataset& train) {
  std::vector<AdaptNote> notes;
  std::vector<AdaptTarget> targets;
  const std::vector<Shape> parts = train.x_parts();
  for (std::size_t l = 0; l < model.layer_count(); ++l) {
    auto* layer = dynamic_cast<nn::Normalization*>(&model.layer(l));
    if (!layer || !layer->adapted()) continue;
    const std::int64_t call = single_call_of(model, l);
    const std::vector<int> inputs =
        call < 0 ? std::vector<int>{} : model.call_inputs(static_cast<std::size_t>(call));
    if (inputs.size() != 1 || inputs[0] >= 0) {
      notes.push_back({false, normalization_label(*layer) +
                                  " keeps its statistics as weights (mean and variance null in "
                                  "its config, as Keras writes an adapted layer) and none are "
                                  "loaded, but it is not called once on one of the model's "
                                  "inputs, so it cannot be adapted to the data: it starts as the "
                                  "identity (mean 0, variance 1) and training does not change "
                                  "it; give the statistics in its config, or with --weights"});
      continue;
    }
    const auto input = static_cast<std::size_t>(-1 - inputs[0]);
    if (parts.size() != model.input_count() || parts[input] != model.input_shape(input))
      continue;  // the data does not fit the model: the trainer says so
    AdaptTarget t{layer, 0, shape_size(parts[input]), parts[input].back(), {}};
    if (t.features <= 0) continue;  // no feature: nothing to compute
    for (std::size_t j = 0; j < input; ++j) t.offset += shape_size(parts[j]);
    t.moments.resize(static_cast<std::size_t>(t.features));
    targets.push_back(std::move(t));
  }
  if (targets.empty()) return notes;

  const std::int64_t row = shape_size(train.x_shape());
  const std::int64_t y_row = train.y_row();
  const std::int64_t chunk =
      std::clamp<std::int64_t>((std::int64_t{1} << 24) / std::max<std::int64_t>(row, 1), 1, 4096);
  std::vector<float> x(static_cast<std::size_t>(chunk * row)),
      y(static_cast<std::size_t>(chunk * y_row));
  std::vector<std::int64_t> indices;
  for (std::int64_t begin = 0; begin < train.size(); begin += chunk) {
    const std::int64_t rows = std::min(chunk, train.size() - begin);
    indices.resize(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i) indices[static_cast<std::size_t>(i)] = begin + i;
    train.read(indices, x.data(), y.data());
    for (AdaptTarget& t : targets) add_chunk_moments(t, x.data(), rows, row);
  }
  for (AdaptTarget& t : targets) {
    std::vector<double> mean, variance;
    for (const FeatureMoments& m : t.moments) {
      mean.push_back(m.mean);
      variance.push_back(m.count > 0 ? m.squares / static_cast<double>(m.count) : 1.0);
    }
    const std::int64_t count = t.moments.front().count;
    t.layer->set_statistics(mean, variance, count);
    notes.push_back({true, "adapted " + normalization_label(*t.layer) +
                               " to the training data, as Keras' adapt() does: the mean and "
                               "variance of each of its " +
                               std::to_string(t.features) + " features over " +
                               std::to_string(train.size()) + " samples (" + std::to_string(count) +
                               " values each)"});
  }
  return notes;
}

}  // namespace tandem
