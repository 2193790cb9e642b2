#include <gtest/gtest.h>

#include <vector>

#include "tandem/communicator.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace {

TEST(ThreadCommunicator, SumsInReplicaOrderIntoEveryBuffer) {
  auto comm = make_communicator(DevicePlan::cpus(3));
  EXPECT_EQ(comm->name(), "threads");
  EXPECT_EQ(comm->size(), 3);
  // Float addition is not associative: (1e8 + 1) - 1e8 = 0 but 1e8 + (1 - 1e8) = 8.
  const std::size_t n = 200000;  // large enough to be split over threads
  std::vector<float> a(n, 1e8f), b(n, 1.0f), c(n, -1e8f);
  b[7] = 3.0f;
  comm->all_reduce_sum({a.data(), b.data(), c.data()}, n);
  const float expected = (1e8f + 1.0f) + -1e8f;
  for (std::size_t i = 0; i < n; ++i) {
    const float e = i == 7 ? (1e8f + 3.0f) + -1e8f : expected;
    ASSERT_EQ(a[i], e) << i;
    ASSERT_EQ(b[i], e) << i;
    ASSERT_EQ(c[i], e) << i;
  }
}

TEST(ThreadCommunicator, OneParticipantIsANoOpAndWrongCountsAreErrors) {
  auto one = make_communicator(DevicePlan::cpus(1));
  std::vector<float> a{1, 2};
  one->all_reduce_sum({a.data()}, 2);
  EXPECT_EQ(a[1], 2.0f);
  auto two = make_communicator(DevicePlan::cpus(2));
  EXPECT_THROW(two->all_reduce_sum({a.data()}, 2), RunError);
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
