#include <gtest/gtest.h>

#include <vector>

#include "parallel/communicator.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

TEST(ThreadCommunicator, SumsInReplicaOrderIntoEveryBuffer) {
  auto comm = make_communicator(DevicePlan::cpus(3));
  EXPECT_EQ(comm->name(), "threads");
  EXPECT_EQ(comm->size(), 3);
  // Float addition is not associative: (1e8 + 1) - 1e8 = 0 but 1e8 + (1 - 1e8) = 8.
  const std::int64_t n = 200000;  // large enough to be split over threads
  Tensor a = Tensor::from_vector({n}, std::vector<float>(n, 1e8f));
  Tensor b = Tensor::from_vector({n}, std::vector<float>(n, 1.0f));
  Tensor c = Tensor::from_vector({n}, std::vector<float>(n, -1e8f));
  b.data()[7] = 3.0f;
  comm->all_reduce_sum({&a, &b, &c});
  const float expected = (1e8f + 1.0f) + -1e8f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float e = i == 7 ? (1e8f + 3.0f) + -1e8f : expected;
    ASSERT_EQ(a.data()[i], e) << i;
    ASSERT_EQ(b.data()[i], e) << i;
    ASSERT_EQ(c.data()[i], e) << i;
  }
}

TEST(ThreadCommunicator, OneParticipantIsANoOpAndWrongCountsAreErrors) {
  auto one = make_communicator(DevicePlan::cpus(1));
  Tensor a = Tensor::from_vector({2}, {1, 2});
  one->all_reduce_sum({&a});
  EXPECT_EQ(a.data()[1], 2.0f);
  auto two = make_communicator(DevicePlan::cpus(2));
  EXPECT_THROW(two->all_reduce_sum({&a}), RunError);
  Tensor longer({3});
  try {
    two->all_reduce_sum({&a, &longer});
    FAIL() << "buffers of different sizes must be refused";
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("participant 1 has 3 elements, participant 0 2"),
              std::string::npos)
        << e.what();
  }
}

// Memory that claims to be a GPU's (host storage underneath): what a CUDA replica's gradients
// look like to a communicator.
class FakeGpuMemory final : public DeviceMemory {
 public:
  Device device() const override { return {MemoryKind::cuda, 1}; }
  std::shared_ptr<float[]> allocate(std::int64_t count) override {
    return std::shared_ptr<float[]>(new float[static_cast<std::size_t>(count)]);
  }
};

TEST(ThreadCommunicator, RefusesBuffersThatAreNotOnTheHost) {
  auto two = make_communicator(DevicePlan::cpus(2));
  Tensor host({4});
  Tensor gpu({4}, std::make_shared<FakeGpuMemory>());
  try {
    two->all_reduce_sum({&host, &gpu});
    FAIL() << "a device buffer must never be read as host memory";
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("participant 1's buffer is on cuda:1, not on the host"),
              std::string::npos)
        << e.what();
  }
}

TEST(Communicator, CudaPlansNeedNcclBeyondOneReplica) {
  DevicePlan plan;
  plan.replicas = {{DeviceKind::cuda, 0}, {DeviceKind::cuda, 1}};
  plan.text = "cuda:0,1";
#ifdef TANDEM_HAVE_NCCL
  // Built with NCCL: it serves the plan where two GPUs exist; with none, initialisation fails
  // with NCCL's own reason. (Two-GPU all-reduce runs in scripts/gpu-check.)
  try {
    EXPECT_EQ(make_communicator(plan)->name(), "nccl");
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL initialisation on cuda:0,1 failed"),
              std::string::npos)
        << e.what();
  }
#else
  try {
    make_communicator(plan);
    FAIL() << "a two-GPU plan without NCCL must be refused";
  } catch (const ConfigError& e) {
#ifdef TANDEM_HAVE_CUDA
    const char* why = "CUDA module was built without NCCL";
#else
    const char* why = "needs CUDA, but this Tandem was built without CUDA";
#endif
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
#endif
  DevicePlan mixed;
  mixed.replicas = {{DeviceKind::cuda, 0}, {DeviceKind::cpu, 0}};
  mixed.text = "mixed";
  try {
    make_communicator(mixed);
    FAIL() << "a plan mixing CPU and CUDA replicas must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot mix CPU and CUDA"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
