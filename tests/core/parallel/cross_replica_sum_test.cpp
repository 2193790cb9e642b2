// CrossReplicaSum: a barrier-style sum between replica threads, reusable round after round.
#include "parallel/cross_replica_sum.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "parallel/abandoned_step.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

TEST(CrossReplicaSum, EveryReplicaGetsTheSumInEveryRound) {
  constexpr int kReplicas = 4, kRounds = 500;
  CrossReplicaSum sum(kReplicas, nullptr);
  std::vector<std::vector<double>> seen(kReplicas);
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r)
    threads.emplace_back([&, r] {
      for (int round = 0; round < kRounds; ++round) {
        // Two values per call, of different lengths in alternate rounds.
        std::vector<double> v = {static_cast<double>(r + round), 1.0};
        if (round % 2) v.push_back(0.5 * r);
        sum.sum(r, v.data(), v.size());
        seen[static_cast<std::size_t>(r)].insert(seen[static_cast<std::size_t>(r)].end(), v.begin(),
                                                 v.end());
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kReplicas; ++r) {
    const auto& v = seen[static_cast<std::size_t>(r)];
    std::size_t k = 0;
    for (int round = 0; round < kRounds; ++round) {
      ASSERT_EQ(v[k++], 0 + 1 + 2 + 3 + 4.0 * round) << "replica " << r << " round " << round;
      ASSERT_EQ(v[k++], 4.0);
      if (round % 2) {
        ASSERT_EQ(v[k++], 0.5 * (0 + 1 + 2 + 3));
      }
    }
  }
}

TEST(CrossReplicaSum, AbandonReleasesTheWaitingReplicasAndResetSumsAfresh) {
  CrossReplicaSum sum(3, nullptr);
  std::vector<std::thread> waiting;
  std::atomic<int> released{0};
  for (int r = 0; r < 2; ++r)  // replica 2 never arrives
    waiting.emplace_back([&, r] {
      double v = r;
      try {
        sum.sum(r, &v, 1);
      } catch (const AbandonedStep&) {
        ++released;
      }
    });
  // Both may or may not be waiting yet: abandon() must release them either way.
  sum.abandon();
  for (auto& t : waiting) t.join();
  EXPECT_EQ(released, 2);
  double late = 1;
  EXPECT_THROW(sum.sum(2, &late, 1), AbandonedStep);

  sum.reset();
  std::vector<double> values = {1, 10, 100};
  std::vector<std::thread> round;
  for (int r = 0; r < 3; ++r)
    round.emplace_back([&, r] { sum.sum(r, &values[static_cast<std::size_t>(r)], 1); });
  for (auto& t : round) t.join();
  EXPECT_EQ(values, (std::vector<double>{111, 111, 111}));
}

TEST(CrossReplicaSum, OneReplicaKeepsItsValues) {
  CrossReplicaSum sum(1, nullptr);
  double v[3] = {1.5, -2, 3};
  sum.sum(0, v, 3);
  EXPECT_EQ(v[0], 1.5);
  EXPECT_EQ(v[1], -2);
  EXPECT_EQ(v[2], 3);
}

}  // namespace
}  // namespace tandem
