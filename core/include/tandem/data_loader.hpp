// DataLoader: turns a Dataset into batches, epoch by epoch.
//
// Each epoch's order is a seeded shuffle (derived from seed and epoch number, so any epoch can be
// replayed exactly, e.g. on resume); the last partial batch is kept. A background thread prepares
// up to `prefetch` batches ahead, so the training step never waits when data is ready.
// Thread-safety: one consumer thread calls start_epoch()/next(); the loader owns its prefetch
// thread and joins it on destruction or on the next start_epoch().
#pragma once

#include <cstdint>
#include <memory>

#include "tandem/dataset.hpp"
#include "tandem/tensor.hpp"

namespace tandem {

struct Batch {
  Tensor x;  // (n, x_shape...)
  Tensor y;  // (n, y_shape...)
  std::int64_t size() const { return x.rank() > 0 ? x.dim(0) : 0; }
};

struct DataLoaderOptions {
  std::int64_t batch_size = 32;
  bool shuffle = true;
  std::uint64_t seed = 0;
  int prefetch = 2;  // batches prepared ahead; 0 reads synchronously
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }
  std::int64_t batches_per_epoch() const;

  /// Starts epoch `epoch` (0-based) at batch `first_batch` (non-zero when resuming mid-epoch).
  void start_epoch(int epoch, std::int64_t first_batch = 0);
  /// Fills `out` with the next batch; false when the epoch is exhausted. Rethrows, in the
  /// caller's thread, any error the prefetch thread hit.
  bool next(Batch& out);

 private:
  struct Impl;
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
