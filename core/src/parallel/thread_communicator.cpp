// The in-process communicators: "threads" (CPU replicas) and "none" (one participant).
#include <algorithm>

#include "backend/cpu/parallel.hpp"
#include "parallel/communicator.hpp"
#include "parallel/cuda_module.hpp"
#include "tandem/error.hpp"

namespace tandem {

namespace {

class ThreadCommunicator : public Communicator {
 public:
  explicit ThreadCommunicator(int size) : size_(size) {}
  std::string name() const override { return "threads"; }
  int size() const override { return size_; }

  void all_reduce_sum(const std::vector<Tensor*>& buffers) override {
    require_buffers(buffers, size_, [](std::size_t) { return Device{}; });
    const std::int64_t n = buffers[0]->size();
    if (size_ == 1 || n == 0) return;
    // Element ranges in parallel; within an element always b0 + b1 + ... + b(N-1).
    cpu::parallel_for(n, 1 << 15, [&](std::int64_t begin, std::int64_t end) {
      float* __restrict first = buffers[0]->data();
      for (int r = 1; r < size_; ++r) {
        const float* __restrict other = buffers[static_cast<std::size_t>(r)]->data();
        for (std::int64_t k = begin; k < end; ++k) first[k] += other[k];
      }
      for (int r = 1; r < size_; ++r)
        std::copy(first + begin, first + end, buffers[static_cast<std::size_t>(r)]->data() + begin);
    });
  }

 private:
  int size_;
};

// One participant: nothing to sum (one GPU in one process).
class NoCommunicator : public Communicator {
 public:
  std::string name() const override { return "none"; }
  int size() const override { return 1; }
  void all_reduce_sum(const std::vector<Tensor*>& buffers) override {
    if (buffers.size() != 1)
      throw RunError("no communication backend is built for " + std::to_string(buffers.size()) +
                     " participants");
  }
};

}  // namespace

void require_buffer_on(std::size_t participant, const Tensor& buffer, const Device& device) {
  if (buffer.device() != device)
    throw RunError("all_reduce_sum: participant " + std::to_string(participant) +
                   "'s buffer is on " + buffer.device().name() + ", not on " +
                   (device.kind == MemoryKind::host ? "the host" : device.name()));
}

void require_buffers(const std::vector<Tensor*>& buffers, int participants,
                     const std::function<Device(std::size_t participant)>& device_of) {
  if (static_cast<int>(buffers.size()) != participants)
    throw RunError("all_reduce_sum: " + std::to_string(buffers.size()) + " buffers for " +
                   std::to_string(participants) + " participants");
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    require_buffer_on(i, *buffers[i], device_of(i));
    if (buffers[i]->size() != buffers[0]->size())
      throw RunError("all_reduce_sum: participant " + std::to_string(i) + " has " +
                     std::to_string(buffers[i]->size()) + " elements, participant 0 " +
                     std::to_string(buffers[0]->size()));
  }
}

std::unique_ptr<StreamCommunicator> make_stream_communicator(const DevicePlan& plan, World& world) {
  for (const auto& d : plan.replicas)
    if (d.kind != DeviceKind::cuda)
      throw ConfigError("devices", "a plan cannot mix CPU and CUDA replicas: " + plan.text);
  const detail::CudaModule& cuda = detail::cuda_module();
  if (!cuda.api)
    throw ConfigError("devices", "device plan '" + plan.text + "' needs CUDA, but " + cuda.why_not);
  if (plan.size() == 1 && world.size() == 1) return nullptr;
  if (cuda.api->make_nccl_communicator) return cuda.api->make_nccl_communicator(plan, world);
  throw ConfigError("devices", "device plan '" + plan.text + "' has " +
                                   std::to_string(plan.size()) +
                                   " CUDA replicas, but this Tandem's CUDA module was built "
                                   "without NCCL");
}

std::unique_ptr<Communicator> make_communicator(const DevicePlan& plan,
                                                const std::shared_ptr<World>& world) {
  if (plan.all_cpu()) return std::make_unique<ThreadCommunicator>(plan.size());
  World& job = world ? *world : *single_process_world();
  if (auto streams = make_stream_communicator(plan, job)) return streams;
  return std::make_unique<NoCommunicator>();
}

}  // namespace tandem
