// make_subset(): a contiguous window [begin, begin + count) of another dataset, e.g. the last
// fraction of the samples held out for validation (as Keras's validation_split does).
#include <vector>

#include "data/wrapped_dataset.hpp"
#include "tandem/error.hpp"

namespace tandem {

namespace {

class SubsetDataset final : public WrappedDataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> parent, std::int64_t begin, std::int64_t count)
      : WrappedDataset(std::move(parent)), begin_(begin), count_(count) {}

  std::int64_t size() const override { return count_; }

  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    mapped_.resize(indices.size());
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const std::int64_t i = indices[k];
      if (i < 0 || i >= count_)
        throw DataError("subset of " + parent().describe() + ": sample " + std::to_string(i) +
                        " out of range (" + std::to_string(count_) + " samples)");
      mapped_[k] = begin_ + i;
    }
    parent().read(mapped_, x, y);
  }

  std::string sample_file(std::int64_t i) const override {
    return i >= 0 && i < count_ ? parent().sample_file(begin_ + i) : std::string();
  }

  std::string sample_place(std::int64_t i) const override {
    return parent().sample_place(begin_ + i);
  }

  std::string describe() const override {
    return "samples [" + std::to_string(begin_) + ", " + std::to_string(begin_ + count_) + ") of " +
           parent().describe();
  }

 private:
  std::int64_t begin_;
  std::int64_t count_;
  mutable std::vector<std::int64_t> mapped_;  // read() is never called concurrently
};

}  // namespace

std::shared_ptr<Dataset> make_subset(std::shared_ptr<const Dataset> parent, std::int64_t begin,
                                     std::int64_t count) {
  if (!parent) throw DataError("make_subset: no parent dataset");
  const std::int64_t n = parent->size();
  if (begin < 0 || count < 0 || begin > n || count > n - begin)
    throw DataError("subset [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                    ") is out of range for " + parent->describe() + " (" + std::to_string(n) +
                    " samples)");
  return std::make_shared<SubsetDataset>(std::move(parent), begin, count);
}

}  // namespace tandem
