// make_class_weighted(): Keras' class_weight as a dataset that adds each sample's weight to its
// targets (keras.src.trainers.data_adapters: class_weight_to_sample_weights).
#include <cmath>
#include <vector>

#include "data/wrapped_dataset.hpp"
#include "tandem/error.hpp"

namespace tandem {

namespace {

class ClassWeightedDataset final : public WrappedDataset {
 public:
  ClassWeightedDataset(std::shared_ptr<const Dataset> parent, std::map<std::int64_t, double> weights)
      : WrappedDataset(std::move(parent)),
        weights_(std::move(weights)),
        targets_(shape_size(this->parent().y_shape())) {}

  std::int64_t weight_count() const override { return 1; }

  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    const auto n = static_cast<std::int64_t>(indices.size());
    if (parent().weighted()) {
      parent().read(indices, x, y);
    } else {
      // The parent's rows are one value shorter: read them apart, then widen.
      parent_rows_.resize(static_cast<std::size_t>(n * targets_));
      parent().read(indices, x, parent_rows_.data());
      for (std::int64_t r = 0; r < n; ++r) {
        for (std::int64_t c = 0; c < targets_; ++c)
          y[r * (targets_ + 1) + c] = parent_rows_[static_cast<std::size_t>(r * targets_ + c)];
        y[r * (targets_ + 1) + targets_] = 1.0f;
      }
    }
    for (std::int64_t r = 0; r < n; ++r) {
      float* row = y + r * (targets_ + 1);
      row[targets_] = static_cast<float>(row[targets_] * weight_of(class_of(row)));
    }
  }

  std::string describe() const override {
    return parent().describe() + " weighted by class";
  }

 private:
  // Keras: the argmax of several target values, else the value rounded (half away from zero).
  std::int64_t class_of(const float* targets) const {
    if (targets_ == 1) {
      const float v = std::round(targets[0]);
      return std::isfinite(v) ? static_cast<std::int64_t>(v) : -1;
    }
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < targets_; ++c)
      if (targets[c] > targets[best]) best = c;
    return best;
  }

  double weight_of(std::int64_t cls) const {
    const auto it = weights_.find(cls);
    return it == weights_.end() ? 1.0 : it->second;
  }

  std::map<std::int64_t, double> weights_;
  std::int64_t targets_;                      // target values per sample
  mutable std::vector<float> parent_rows_;    // read() is never called concurrently
};

}  // namespace

std::shared_ptr<Dataset> make_class_weighted(std::shared_ptr<const Dataset> parent,
                                             std::map<std::int64_t, double> weights,
                                             const std::string& path) {
  if (!parent) throw DataError("make_class_weighted: no parent dataset");
  const std::vector<Shape> parts = parent->y_parts();
  if (parts.size() != 1 || parts[0].size() > 1)
    throw ConfigError(path, "weighs samples by the class of one target per sample (a class "
                            "index, or one value per class), but " + parent->describe() +
                            " has targets of shape " + shape_to_string(parent->y_shape(), true));
  if (parent->weight_count() > 1)
    throw ConfigError(path, "weighs each sample once, by its class, but " + parent->describe() +
                                " gives each sample " + std::to_string(parent->weight_count()) +
                                " weights (one per position); fold the class weights into them");
  return std::make_shared<ClassWeightedDataset>(std::move(parent), std::move(weights));
}

}  // namespace tandem
