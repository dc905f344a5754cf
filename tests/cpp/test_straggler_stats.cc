// StragglerStats from issue times whose answer is known in closed form: a rank that issues 20 ms
// after the earliest every time is named with that lateness; ties name nobody as last; the
// window keeps the last collectives only. And the shared-memory transport's issue times: what
// every rank reads for a collective is what each rank stamped, once all have issued it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <string>
#include <vector>

#include "comm_test_support.h"
#include "collective_calls.h"
#include "executor/communicator.h"
#include "executor/straggler_stats.h"
#include "memory_store.h"
#include "rank_threads.h"

namespace ring {
namespace {

using namespace testing_support;

constexpr int64_t kMs = 1000 * 1000;

TEST(StragglerStats, NamesTheRankThatIssuesLateWithItsLateness) {
  StragglerStats s(3, 100);
  for (int i = 0; i < 10; ++i) {
    const int64_t base = i * 100 * kMs;
    // Rank 1 a little after rank 0, rank 2 20 ms after rank 0; rank 2 is 30 ms late once.
    s.add({base, base + kMs / 10, base + (i == 9 ? 30 : 20) * kMs});
  }
  const StragglerReport r = s.report(1.0);
  EXPECT_EQ(r.collectives, 10u);
  EXPECT_EQ(r.stragglers, std::vector<int>{2});
  EXPECT_DOUBLE_EQ(r.ranks[2].medianMs, 20.0);
  EXPECT_DOUBLE_EQ(r.ranks[2].p90Ms, 30.0);  // nearest rank: the 10th of 10 sorted
  EXPECT_DOUBLE_EQ(r.ranks[2].maxMs, 30.0);
  EXPECT_EQ(r.ranks[2].lastIn, 10u);
  EXPECT_DOUBLE_EQ(r.ranks[0].medianMs, 0.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].medianMs, 0.1);
  EXPECT_EQ(r.describe(),
            "rank 2 was the last to issue in 10 of 10 collectives, late by 20 ms (median), 30 ms (p90)");
}

TEST(StragglerStats, TiesNameNobodyAndTheWindowForgets) {
  StragglerStats s(2, 4);
  for (int i = 0; i < 4; ++i) s.add({0, 50 * kMs});  // rank 1 late...
  for (int i = 0; i < 4; ++i) s.add({7 * kMs, 7 * kMs});  // ...then never again, ties
  const StragglerReport r = s.report(1.0);
  EXPECT_EQ(r.collectives, 4u);
  EXPECT_TRUE(r.stragglers.empty());
  EXPECT_EQ(r.ranks[0].lastIn + r.ranks[1].lastIn, 0u);
  EXPECT_EQ(s.added(), 8u);
  EXPECT_EQ(r.describe(), "no rank was late by 1 ms or more (median) in the last 4 collectives");
}

// Threads as ranks over shared memory: a rank that issues each collective 20 ms after the
// others is seen so by every rank's communicator.
TEST(StragglerStats, AFailureFollowsTheLateness) {
  StragglerReport r;
  r.failure = "all_reduce #7: rank 2 has sent nothing for 5.0 s";
  EXPECT_EQ(r.describe(), "no collective of this group has been seen by every rank yet; the group "
                          "failed at all_reduce #7: rank 2 has sent nothing for 5.0 s");
}

TEST(StragglerStats, TheCommunicatorsSeeALateRank) {
  using testing_support::MemoryStore;
  using testing_support::runRanks;
  MemoryStore store;
  std::vector<StragglerReport> reports(3);
  auto outcomes = runRanks(3, [&](int rank) {
    Communicator comm(store, rank, 3, testing_support::smallSlotOptions());
    std::vector<float> data(64, 1.0f);
    for (uint64_t seq = 0; seq < 12; ++seq) {
      if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      comm.announceIssued(seq + 1);
      CallInfo c{seq, std::chrono::milliseconds(10000)};
      runAllReduce(comm, data.data(), static_cast<int64_t>(data.size()), DType::Float32, RedOp::Sum,
                     1.0, c);
    }
    // The report reads what the batches have not: every collective that every rank issued.
    comm.announceIssued(13);
    reports[rank] = comm.stragglerReport(1.0);
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
    EXPECT_EQ(reports[r].stragglers, std::vector<int>{2}) << reports[r].describe();
    EXPECT_NEAR(reports[r].ranks[2].medianMs, 20.0, 5.0) << reports[r].describe();
    EXPECT_GE(reports[r].collectives, 11u) << reports[r].describe();
  }
}

// The report covers the group's last collectives (the window), not only the last few that the
// transport still keeps (64 per rank): the times are read along the way, not only when asked.
TEST(StragglerStats, TheReportCoversMoreCollectivesThanTheTransportKeeps) {
  using testing_support::MemoryStore;
  using testing_support::runRanks;
  MemoryStore store;
  constexpr uint64_t kCalls = 200;
  std::vector<StragglerReport> reports(3);
  auto outcomes = runRanks(3, [&](int rank) {
    Communicator comm(store, rank, 3, testing_support::smallSlotOptions());
    std::vector<float> data(16, 1.0f);
    for (uint64_t seq = 0; seq < kCalls; ++seq) {
      comm.announceIssued(seq + 1);
      CallInfo c{seq, std::chrono::milliseconds(10000)};
      runAllReduce(comm, data.data(), static_cast<int64_t>(data.size()), DType::Float32, RedOp::Sum,
                     1.0, c);
    }
    reports[rank] = comm.stragglerReport(1.0);
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
    // Every collective up to the last that every rank had issued when this rank asked: at
    // least kCalls - 1 (a rank finishes its last all_reduce only once every rank issued it).
    EXPECT_GE(reports[r].collectives, kCalls - 1) << reports[r].describe();
    EXPECT_LE(reports[r].collectives, kCalls) << reports[r].describe();
  }
}

}  // namespace
}  // namespace ring
