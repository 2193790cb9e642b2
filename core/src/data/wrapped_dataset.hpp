// WrappedDataset: a dataset made from another one — a window of it (make_subset), its samples
// weighted by class (make_class_weighted), kept in memory (make_cached), repeated (tandem data
// bench). Everything it does not change is the parent's: size, shapes, parts, weights, class
// names, sample files, skipped files; a subclass overrides what it changes, and read() and
// describe(). Shares ownership of the parent; the same threading rules as Dataset.
#pragma once

#include <memory>

#include "data/dataset.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class WrappedDataset : public Dataset {
 public:
  explicit WrappedDataset(std::shared_ptr<const Dataset> parent) : parent_(std::move(parent)) {}
  std::int64_t size() const override { return parent_->size(); }
  Shape x_shape() const override { return parent_->x_shape(); }
  Shape y_shape() const override { return parent_->y_shape(); }
  std::vector<Shape> x_parts() const override { return parent_->x_parts(); }
  std::vector<Shape> y_parts() const override { return parent_->y_parts(); }
  std::int64_t weight_count() const override { return parent_->weight_count(); }
  std::vector<std::string> class_names() const override { return parent_->class_names(); }
  std::string sample_file(std::int64_t i) const override { return parent_->sample_file(i); }
  std::int64_t skipped_files() const override { return parent_->skipped_files(); }
  std::string sample_place(std::int64_t i) const override { return parent_->sample_place(i); }

 protected:
  const Dataset& parent() const { return *parent_; }

 private:
  std::shared_ptr<const Dataset> parent_;
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
