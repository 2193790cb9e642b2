#include "parallel/cross_replica_sum.hpp"

#include <algorithm>

#include "parallel/abandoned_step.hpp"

namespace tandem {

CrossReplicaSum::CrossReplicaSum(int replicas, std::shared_ptr<World> world)
    : replicas_(replicas),
      world_(world ? std::move(world) : single_process_world()),
      slots_(static_cast<std::size_t>(replicas), nullptr) {}

namespace {

[[noreturn]] void throw_abandoned() {
  throw AbandonedStep(
      "synchronized statistics: another replica failed during this step and will not add its "
      "share");
}

}  // namespace

void CrossReplicaSum::sum(int replica, double* data, std::size_t n) {
  std::unique_lock lock(mutex_);
  if (abandoned_) throw_abandoned();
  slots_[static_cast<std::size_t>(replica)] = data;
  const std::uint64_t generation = generation_;
  if (++arrived_ == replicas_) {
    total_.assign(n, 0.0);
    for (const double* slot : slots_)  // replica order
      for (std::size_t k = 0; k < n; ++k) total_[k] += slot[k];
    if (world_->size() > 1) {
      const std::vector<double> ranks = world_->all_gather(total_.data(), n);
      std::fill(total_.begin(), total_.end(), 0.0);
      for (int r = 0; r < world_->size(); ++r)  // rank order
        for (std::size_t k = 0; k < n; ++k) total_[k] += ranks[static_cast<std::size_t>(r) * n + k];
    }
    arrived_ = 0;
    ++generation_;
    done_.notify_all();
  } else {
    done_.wait(lock, [&] { return generation_ != generation || abandoned_; });
    if (generation_ == generation) throw_abandoned();
  }
  // total_ stays until every replica has called again, which includes this one.
  std::copy(total_.begin(), total_.begin() + static_cast<std::ptrdiff_t>(n), data);
}

void CrossReplicaSum::abandon() {
  {
    std::lock_guard lock(mutex_);
    abandoned_ = true;
  }
  done_.notify_all();
}

void CrossReplicaSum::reset() {
  std::lock_guard lock(mutex_);
  abandoned_ = false;
  arrived_ = 0;
  std::fill(slots_.begin(), slots_.end(), nullptr);
}

}  // namespace tandem
