// DataLoader: turns a Dataset into batches, epoch by epoch.
//
// Each epoch's order is a seeded shuffle (derived from seed and epoch number, so any epoch can be
// replayed exactly, e.g. on resume); the last partial batch is kept. A background thread prepares
// up to `prefetch` batches ahead, so the training step never waits when data is ready.
// Thread-safety: one consumer thread calls start_epoch()/next(); the loader owns its prefetch
// thread and joins it on destruction or on the next start_epoch().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "data/batch_mixing.hpp"
#include "data/dataset.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// A batch, or this process's shard of one: rows [global_offset, global_offset + size()) of a
/// global batch of global_size samples (the whole batch when one process trains).
struct Batch {
  Tensor x;                       // (n, x_shape...)
  Tensor y;                       // (n, y_shape...)
  std::int64_t global_size = -1;  // -1: this is the whole batch
  std::int64_t global_offset = 0;
  std::int64_t size() const { return x.rank() > 0 ? x.dim(0) : 0; }
  std::int64_t whole_size() const { return global_size < 0 ? size() : global_size; }
};

/// Rows of part `index` of `count` when `total` samples are split in order and the first
/// total % count parts take one more (docs/design.md contract 1): {offset, size}.
struct Shard {
  std::int64_t offset = 0;
  std::int64_t size = 0;
};
Shard shard_of(std::int64_t total, int count, int index);

struct DataLoaderOptions {
  std::int64_t batch_size = 32;  // the global batch
  bool shuffle = true;
  std::uint64_t seed = 0;
  int prefetch = 2;  // batches prepared ahead; 0 reads synchronously
  // Multi-process runs: every process walks the same global order and reads only its shard of
  // each batch (shard_of(batch, shard_count, shard_index)).
  int shard_index = 0;
  int shard_count = 1;
  /// Storage for the batches' tensors, `count` floats zero-filled or not (default: ordinary host
  /// memory). GPU plans pass pinned memory, so copies to the device run at full speed without a
  /// staging copy. Called from the prefetch thread; must be thread-safe.
  std::function<std::shared_ptr<float[]>(std::int64_t count)> allocate = nullptr;
  /// Mixup or CutMix of every batch (data/batch_mixing.hpp): training loaders only.
  MixOptions mix{};
  /// Checks each batch's (shard's) targets `y` as read, before any mixing; `samples` are the
  /// dataset indices of its rows. Throws DataError naming the sample to end the epoch with it
  /// (the trainer passes Objective::check_labels). Called from the prefetch thread.
  std::function<void(const Tensor& y, std::span<const std::int64_t> samples)> check_targets =
      nullptr;
};

class DataLoader {
 public:
  /// Throws ConfigError ("batch_size", "data.mixup", "data.cutmix") for options the dataset
  /// cannot take.
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
  /// Seconds next() spent waiting for batches since start_epoch(): time the training step
  /// stood idle because the input pipeline was behind (with prefetch 0, all reading time).
  double wait_seconds() const;

 private:
  struct Impl;
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
