// DataLoader: seeded per-epoch order, batching, and a background prefetch thread feeding a
// bounded queue. Errors in the prefetch thread are handed to the consumer through next().
#include "data/data_loader.hpp"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>
#include <vector>

#include "tandem/error.hpp"
#include "tandem/rng.hpp"

namespace tandem {

struct DataLoader::Impl {
  const Dataset& dataset;
  DataLoaderOptions options;
  Shape x_shape, y_shape;
  std::int64_t size = 0;
  std::int64_t batches = 0;

  bool started = false;
  std::vector<std::int64_t> order;  // this epoch's sample order
  int epoch = 0;
  std::int64_t next_batch = 0;      // synchronous mode: the next batch to read
  double wait_seconds = 0;          // the consumer's, since start_epoch()

  // Prefetch state, guarded by `mutex`.
  std::thread worker;
  std::mutex mutex;
  std::condition_variable space;   // the worker waits for room in `ready`
  std::condition_variable filled;  // the consumer waits for a batch, an error or the end
  std::deque<Batch> ready;
  bool stop = false;
  bool done = false;
  std::exception_ptr error;

  Impl(const Dataset& d, DataLoaderOptions o)
      : dataset(d), options(o), x_shape(d.x_shape()), y_shape(d.y_shape()), size(d.size()) {
    // (size + batch - 1) / batch would overflow for a batch near 2^63.
    batches = size / options.batch_size + (size % options.batch_size != 0 ? 1 : 0);
    // A weighted dataset's rows carry the sample's weights after its targets (Dataset::read).
    if (d.weighted()) y_shape = {d.y_row()};
  }

  ~Impl() { stop_worker(); }

  // Reads batch `b` of the current order into fresh tensors (a consumer may keep old batches,
  // and tensors share storage, so buffers are not recycled behind its back).
  Batch make_batch(std::int64_t b) const {
    const std::int64_t first = b * options.batch_size;
    const std::int64_t whole = std::min(options.batch_size, size - first);
    const Shard shard = shard_of(whole, options.shard_count, options.shard_index);
    const std::int64_t n = shard.size;
    Shape xs{n}, ys{n};
    xs.insert(xs.end(), x_shape.begin(), x_shape.end());
    ys.insert(ys.end(), y_shape.begin(), y_shape.end());
    Batch batch = options.allocate ? Batch{Tensor::adopt(xs, options.allocate(shape_size(xs))),
                                           Tensor::adopt(ys, options.allocate(shape_size(ys)))}
                                   : Batch{Tensor(xs), Tensor(ys)};
    if (options.shard_count > 1) {
      batch.global_size = whole;
      batch.global_offset = shard.offset;
    }
    const std::span<const std::int64_t> samples(order.data() + first + shard.offset,
                                                static_cast<std::size_t>(n));
    if (n > 0) dataset.read(samples, batch.x.data(), batch.y.data());
    if (dataset.weighted()) check_weights(samples, batch.y.data());
    if (options.check_targets && n > 0) options.check_targets(batch.y, samples);
    if (options.mix.kind != MixOptions::Kind::none && n > 0)
      mix(MixPlace{options.seed, epoch, b, whole, shard.offset}, first, batch);
    return batch;
  }

  // Mixup / CutMix: reads each row's partner (in the global batch) and blends it in.
  void mix(const MixPlace& place, std::int64_t first, Batch& batch) const {
    const std::int64_t n = batch.size();
    std::vector<std::int64_t> partners(static_cast<std::size_t>(n));
    for (std::int64_t k = 0; k < n; ++k)
      partners[static_cast<std::size_t>(k)] = order[first + mix_partner(place, place.first_row + k)];
    const std::int64_t y_row = shape_size(y_shape);
    std::vector<float> px(static_cast<std::size_t>(n * shape_size(x_shape)));
    std::vector<float> py(static_cast<std::size_t>(n * y_row));
    dataset.read(partners, px.data(), py.data());
    if (dataset.weighted()) check_weights(partners, py.data());
    mix_rows(options.mix, place, x_shape, n, batch.x.data(), batch.y.data(), px.data(), py.data(),
             y_row);
  }

  // A weight that is negative, NaN or infinite would turn the loss into nonsense, silently.
  // `y`: the samples' target rows, each ending with its weights.
  void check_weights(std::span<const std::int64_t> samples, const float* y) const {
    const std::int64_t width = y_shape[0];
    const std::int64_t count = dataset.weight_count();
    for (std::size_t k = 0; k < samples.size(); ++k)
      for (std::int64_t p = 0; p < count; ++p) {
        const float w = y[static_cast<std::int64_t>(k) * width + width - count + p];
        if (std::isfinite(w) && w >= 0) continue;
        std::ostringstream text;
        text << w;
        const std::string position =
            count > 1 ? " at position " + std::to_string(p) + " of " + std::to_string(count) : "";
        throw DataError(dataset.describe() + ": sample " + std::to_string(samples[k]) +
                        " has weight " + text.str() + position + "; expected a finite weight >= 0");
      }
  }

  void stop_worker() {
    if (!worker.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    space.notify_all();
    worker.join();
  }

  void run(std::int64_t first_batch) {
    for (std::int64_t b = first_batch; b < batches; ++b) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        space.wait(lock, [&] {
          return stop || static_cast<std::int64_t>(ready.size()) < options.prefetch;
        });
        if (stop) return;
      }
      Batch batch;
      try {
        batch = make_batch(b);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        error = std::current_exception();
        done = true;
        filled.notify_all();
        return;
      }
      std::lock_guard<std::mutex> lock(mutex);
      ready.push_back(std::move(batch));
      filled.notify_all();
    }
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    filled.notify_all();
  }
};

Shard shard_of(std::int64_t total, int count, int index) {
  const std::int64_t base = total / count, extra = total % count;
  return {index * base + std::min<std::int64_t>(index, extra), base + (index < extra ? 1 : 0)};
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  if (!dataset_) throw DataError("DataLoader: no dataset");
  if (options_.batch_size <= 0)
    throw ConfigError("batch_size",
                      "expected a positive integer, got " + std::to_string(options_.batch_size));
  if (options_.shard_count < 1 || options_.shard_index < 0 ||
      options_.shard_index >= options_.shard_count)
    throw RunError("DataLoader: shard " + std::to_string(options_.shard_index) + " of " +
                   std::to_string(options_.shard_count));
  if (options_.prefetch < 0)
    throw ConfigError("prefetch",
                      "expected a non-negative integer, got " + std::to_string(options_.prefetch));
  if (options_.mix.kind != MixOptions::Kind::none)
    check_mixable(*dataset_, options_.mix,
                  options_.mix.kind == MixOptions::Kind::mixup ? "data.mixup" : "data.cutmix");
  impl_ = std::make_unique<Impl>(*dataset_, options_);
}

DataLoader::~DataLoader() = default;  // Impl's destructor stops and joins the prefetch thread

std::int64_t DataLoader::batches_per_epoch() const {
  return impl_->batches;
}

void DataLoader::start_epoch(int epoch, std::int64_t first_batch) {
  Impl& s = *impl_;
  s.stop_worker();
  s.started = false;
  if (epoch < 0) throw DataError("DataLoader: negative epoch " + std::to_string(epoch));
  if (first_batch < 0 || first_batch > s.batches)
    throw DataError("DataLoader: cannot start at batch " + std::to_string(first_batch) +
                    " of an epoch of " + std::to_string(s.batches) + " batches (" +
                    dataset_->describe() + ")");

  s.order.resize(static_cast<std::size_t>(s.size));
  std::iota(s.order.begin(), s.order.end(), std::int64_t{0});
  if (options_.shuffle) {
    Rng rng(Rng::derive(options_.seed, static_cast<std::uint64_t>(epoch)));
    for (std::size_t i = s.order.size(); i > 1; --i)
      std::swap(s.order[i - 1], s.order[rng.below(i)]);
  }

  s.ready.clear();
  s.stop = false;
  s.done = false;
  s.error = nullptr;
  s.next_batch = first_batch;
  s.epoch = epoch;
  s.wait_seconds = 0;
  s.started = true;
  if (options_.prefetch > 0) s.worker = std::thread([&s, first_batch] { s.run(first_batch); });
}

double DataLoader::wait_seconds() const {
  return impl_->wait_seconds;
}

bool DataLoader::next(Batch& out) {
  Impl& s = *impl_;
  if (!s.started) throw RunError("DataLoader::next() called before start_epoch()");
  if (options_.prefetch == 0) {
    if (s.next_batch >= s.batches) return false;
    const auto start = std::chrono::steady_clock::now();
    out = s.make_batch(s.next_batch);
    s.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++s.next_batch;
    return true;
  }
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.ready.empty() && !s.done) {
    const auto start = std::chrono::steady_clock::now();
    s.filled.wait(lock, [&] { return !s.ready.empty() || s.done; });
    s.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (!s.ready.empty()) {
    out = std::move(s.ready.front());
    s.ready.pop_front();
    lock.unlock();
    s.space.notify_one();
    return true;
  }
  if (s.error) std::rethrow_exception(s.error);
  return false;
}

}  // namespace tandem
