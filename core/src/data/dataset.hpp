// Dataset: random access to (x, y) samples stored somewhere (a file, memory, a generator).
//
// read() is called from one thread at a time (the DataLoader's prefetch thread), never
// concurrently, so implementations need no locking of their own. Implementations throw DataError
// with the file name and what was wrong.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  /// Per-sample shapes, without the batch dimension; y of a class-index dataset is {} (a scalar).
  virtual Shape x_shape() const = 0;
  virtual Shape y_shape() const = 0;
  /// A dataset of several arrays per sample (a model's several inputs, or targets of its several
  /// outputs) packs them, flattened, into one row: x_shape() is then {total values}, and
  /// x_parts() gives each array's per-sample shape in order. One array: {x_shape()}.
  virtual std::vector<Shape> x_parts() const { return {x_shape()}; }
  virtual std::vector<Shape> y_parts() const { return {y_shape()}; }
  /// How many weights each sample has (Keras' sample_weight): 0 (none), 1 (the sample's
  /// weight), or one per position of its targets (a sequence's steps, an image's pixels: Keras'
  /// temporal weights, in the targets' position order). read() writes them into y after the
  /// sample's targets.
  virtual std::int64_t weight_count() const { return 0; }
  bool weighted() const { return weight_count() > 0; }
  /// The values read() writes into y per sample: the targets, then the weights.
  std::int64_t y_row() const { return shape_size(y_shape()) + weight_count(); }
  /// False for data given without targets (a CSV without "y" columns, NumPy x alone): y_shape()
  /// is then {0} and read() writes nothing into y. Such data can be predicted, not trained on or
  /// evaluated (Trainer::check_data_fits says so).
  bool labeled() const {
    const Shape y = y_shape();
    return !(y.size() == 1 && y[0] == 0);
  }
  /// Copies samples `indices` (each in [0, size())) into x (rows of shape_size(x_shape()))
  /// and y (rows of y_row() values), in the order given.
  virtual void read(std::span<const std::int64_t> indices, float* x, float* y) const = 0;
  /// What each class index stands for, in index order (image folders: the class sub-folders'
  /// names, sorted), or empty when the data does not say.
  virtual std::vector<std::string> class_names() const { return {}; }
  /// The file sample i (in [0, size())) is read from — an image folder's or list's image, its
  /// path as found — or empty when the data's samples are not files of their own.
  virtual std::string sample_file(std::int64_t /*i*/) const { return {}; }
  /// Unreadable files left out so far (image folders with on_bad_file "skip"). Any thread may
  /// ask while another reads.
  virtual std::int64_t skipped_files() const { return 0; }
  /// One line for logs and the run_started event: "idx: /path/train-images... (60000 samples)".
  virtual std::string describe() const = 0;
  /// How an error names sample i: "sample 195 of npy: ... (200 samples)" — a subset (a
  /// validation_split) names its parent's sample, the row of the file.
  virtual std::string sample_place(std::int64_t i) const {
    return "sample " + std::to_string(i) + " of " + describe();
  }
};

/// Builds a dataset from its run-config spec ({"type": "idx" | "hdf5" | "synthetic", ...}).
/// `path` is the spec's JSON path for error messages; relative file names resolve against
/// `base_dir`. Throws ConfigError for a bad spec and DataError for bad or missing data.
std::shared_ptr<Dataset> make_dataset(const nlohmann::json& spec, const std::string& path,
                                      const std::string& base_dir);

/// Samples [begin, begin + count) of another dataset, as a dataset (validation splits).
std::shared_ptr<Dataset> make_subset(std::shared_ptr<const Dataset> parent, std::int64_t begin,
                                     std::int64_t count);

/// `parent` with each sample weighted by its class, as Keras' fit(class_weight=...): the class
/// is the target's argmax when a sample has several target values, else the value rounded; a
/// class `weights` leaves out weighs 1; a sample's own weight (a weighted parent) is multiplied
/// in. Throws ConfigError at `path` unless the samples have one target array of rank 0 or 1.
std::shared_ptr<Dataset> make_class_weighted(std::shared_ptr<const Dataset> parent,
                                             std::map<std::int64_t, double> weights,
                                             const std::string& path);

}  // namespace tandem

TANDEM_INTERNAL_API_END
