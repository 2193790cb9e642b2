#include "parallel/cross_replica_sum.hpp"

#include <algorithm>

#include "tandem/error.hpp"

namespace tandem {

CrossReplicaSum::CrossReplicaSum(int replicas, std::shared_ptr<World> world)
    : replicas_(replicas),
      world_(world ? std::move(world) : single_process_world()),
      slots_(static_cast<std::size_t>(replicas), nullptr) {}

void CrossReplicaSum::sum(int replica, double* data, std::size_t n) {
  std::unique_lock lock(mutex_);
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
    done_.wait(lock, [&] { return generation_ != generation; });
  }
  // total_ stays until every replica has called again, which includes this one.
  std::copy(total_.begin(), total_.begin() + static_cast<std::ptrdiff_t>(n), data);
}

}  // namespace tandem
