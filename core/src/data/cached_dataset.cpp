// make_cached(): a dataset that keeps every sample it has read in memory ("cache": true in a
// dataset spec), so decoding and file reads happen in the first epoch only (Keras'
// Dataset.cache()). The memory for all samples is reserved up front but only touched as samples
// arrive; a dataset larger than this machine's memory is refused when it opens.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "data/datasets.hpp"
#include "data/wrapped_dataset.hpp"
#include "tandem/error.hpp"

namespace tandem::data {

namespace {

// A row of `count` values (none for data without targets, whose buffers may be null).
void copy_values(float* to, const float* from, std::int64_t count) {
  if (count > 0) std::memcpy(to, from, static_cast<std::size_t>(count) * sizeof(float));
}

class CachedDataset final : public WrappedDataset {
 public:
  CachedDataset(std::shared_ptr<const Dataset> parent, std::int64_t x_row, std::int64_t y_row)
      : WrappedDataset(std::move(parent)),
        x_row_(x_row),
        y_row_(y_row),
        x_(std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(size() * x_row))),
        y_(std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(size() * y_row))),
        cached_(static_cast<std::size_t>(size()), false) {}

  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    missing_.clear();
    for (const std::int64_t i : indices) {
      if (i < 0 || i >= size())
        throw DataError(describe() + ": sample " + std::to_string(i) + " out of range");
      if (!cached_[static_cast<std::size_t>(i)]) missing_.push_back(i);
    }
    if (!missing_.empty()) fill(missing_);
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const std::int64_t i = indices[k];
      copy_values(x + k * x_row_, x_.get() + i * x_row_, x_row_);
      copy_values(y + k * y_row_, y_.get() + i * y_row_, y_row_);
    }
  }

  std::string describe() const override { return parent().describe() + ", cached in memory"; }

 private:
  // Reads `samples` (not yet cached, possibly repeated) from the parent into the cache.
  void fill(std::vector<std::int64_t>& samples) const {
    std::sort(samples.begin(), samples.end());
    samples.erase(std::unique(samples.begin(), samples.end()), samples.end());
    staging_x_.resize(samples.size() * x_row_);
    staging_y_.resize(samples.size() * y_row_);
    parent().read(samples, staging_x_.data(), staging_y_.data());
    for (std::size_t k = 0; k < samples.size(); ++k) {
      const std::int64_t i = samples[k];
      copy_values(x_.get() + i * x_row_, staging_x_.data() + k * x_row_, x_row_);
      copy_values(y_.get() + i * y_row_, staging_y_.data() + k * y_row_, y_row_);
      cached_[static_cast<std::size_t>(i)] = true;
    }
  }

  std::int64_t x_row_, y_row_;
  // read() is never called concurrently (Dataset), so the cache needs no lock.
  std::unique_ptr<float[]> x_, y_;
  mutable std::vector<bool> cached_;
  mutable std::vector<std::int64_t> missing_;
  mutable std::vector<float> staging_x_, staging_y_;
};

}  // namespace

std::shared_ptr<Dataset> make_cached(std::shared_ptr<const Dataset> parent,
                                     const std::string& path) {
  const std::int64_t n = parent->size();
  const std::int64_t x_row = shape_size(parent->x_shape());
  const std::int64_t y_row = parent->y_row();  // 0 for data without targets
  const double bytes = static_cast<double>(n) * static_cast<double>(x_row + y_row) * sizeof(float);
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  if (bytes > 0.8 * memory)
    throw ConfigError(path, "caching " + parent->describe() + " takes " +
                                std::to_string(static_cast<std::int64_t>(bytes / (1 << 20))) +
                                " MiB, more than 80% of this machine's " +
                                std::to_string(static_cast<std::int64_t>(memory / (1 << 20))) +
                                " MiB of memory; leave \"cache\" out");
  return std::make_shared<CachedDataset>(std::move(parent), x_row, y_row);
}

}  // namespace tandem::data
