// make_subset(): a contiguous window [begin, begin + count) of another dataset, e.g. the last
// fraction of the samples held out for validation (as Keras's validation_split does).
#include <vector>

#include "data/dataset.hpp"
#include "tandem/error.hpp"

namespace tandem {

namespace {

class SubsetDataset final : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> parent, std::int64_t begin, std::int64_t count)
      : parent_(std::move(parent)), begin_(begin), count_(count) {}

  std::int64_t size() const override { return count_; }
  Shape x_shape() const override { return parent_->x_shape(); }
  Shape y_shape() const override { return parent_->y_shape(); }
  std::vector<Shape> x_parts() const override { return parent_->x_parts(); }
  std::vector<Shape> y_parts() const override { return parent_->y_parts(); }
  bool weighted() const override { return parent_->weighted(); }
  std::vector<std::string> class_names() const override { return parent_->class_names(); }
  std::int64_t skipped_files() const override { return parent_->skipped_files(); }

  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    mapped_.resize(indices.size());
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const std::int64_t i = indices[k];
      if (i < 0 || i >= count_)
        throw DataError("subset of " + parent_->describe() + ": sample " + std::to_string(i) +
                        " out of range (" + std::to_string(count_) + " samples)");
      mapped_[k] = begin_ + i;
    }
    parent_->read(mapped_, x, y);
  }

  std::string describe() const override {
    return "samples [" + std::to_string(begin_) + ", " + std::to_string(begin_ + count_) + ") of " +
           parent_->describe();
  }

 private:
  std::shared_ptr<const Dataset> parent_;
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
