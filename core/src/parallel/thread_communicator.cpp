// The in-process communicators: "threads" (CPU replicas) and "none" (one participant).
#include <algorithm>

#include "backend/cpu/parallel.hpp"
#include "parallel/cuda_module.hpp"
#include "tandem/communicator.hpp"
#include "tandem/error.hpp"

namespace tandem {

namespace {

class ThreadCommunicator : public Communicator {
 public:
  explicit ThreadCommunicator(int size) : size_(size) {}
  std::string name() const override { return "threads"; }
  int size() const override { return size_; }

  void all_reduce_sum(const std::vector<float*>& buffers, std::size_t count) override {
    if (static_cast<int>(buffers.size()) != size_)
      throw RunError("all_reduce_sum: " + std::to_string(buffers.size()) + " buffers for " +
                     std::to_string(size_) + " participants");
    if (size_ == 1 || count == 0) return;
    const auto n = static_cast<std::int64_t>(count);
    // Element ranges in parallel; within an element always b0 + b1 + ... + b(N-1).
    cpu::parallel_for(n, 1 << 15, [&](std::int64_t begin, std::int64_t end) {
      float* __restrict first = buffers[0];
      for (int r = 1; r < size_; ++r) {
        const float* __restrict other = buffers[static_cast<std::size_t>(r)];
        for (std::int64_t k = begin; k < end; ++k) first[k] += other[k];
      }
      for (int r = 1; r < size_; ++r)
        std::copy(first + begin, first + end, buffers[static_cast<std::size_t>(r)] + begin);
    });
  }

 private:
  int size_;
};

class NoCommunicator : public Communicator {
 public:
  std::string name() const override { return "none"; }
  int size() const override { return 1; }
  void all_reduce_sum(const std::vector<float*>& buffers, std::size_t) override {
    if (buffers.size() != 1)
      throw RunError("no communication backend is built for " + std::to_string(buffers.size()) +
                     " participants");
  }
};

}  // namespace

std::unique_ptr<Communicator> make_communicator(const DevicePlan& plan,
                                                const std::shared_ptr<World>& world) {
  if (plan.all_cpu()) return std::make_unique<ThreadCommunicator>(plan.size());
  for (const auto& d : plan.replicas)
    if (d.kind != DeviceKind::cuda)
      throw ConfigError("devices", "a plan cannot mix CPU and CUDA replicas: " + plan.text);
  const detail::CudaModule& cuda = detail::cuda_module();
  if (!cuda.api)
    throw ConfigError("devices", "device plan '" + plan.text + "' needs CUDA, but " + cuda.why_not);
  World& job = world ? *world : *single_process_world();
  if (cuda.api->make_nccl_communicator && (plan.size() > 1 || job.size() > 1))
    return cuda.api->make_nccl_communicator(plan, job);
  if (plan.size() == 1 && job.size() == 1) return std::make_unique<NoCommunicator>();
  throw ConfigError("devices", "device plan '" + plan.text + "' has " +
                                   std::to_string(plan.size()) +
                                   " CUDA replicas, but this Tandem's CUDA module was built "
                                   "without NCCL");
}

}  // namespace tandem
