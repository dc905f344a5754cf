// CopyChoice (executor/copy_choice.h): which calls are trials is fixed by a call's place among
// its size class's calls alone (so every rank times the same calls), and the untried calls
// follow the method whose fastest trial took less time per byte.
#include <gtest/gtest.h>

#include <vector>

#include "closed_forms.h"
#include "comm_test_support.h"
#include "executor/copy_choice.h"
#include "executor/communicator.h"

namespace ring {
namespace {

using C = CopyChoice;

// Runs one period of `bytes`-sized calls, the streamed trials taking `streamedMicros` and the
// cached ones `cachedMicros`; returns the choices made.
std::vector<C::Call> period(CopyChoice& choice, int64_t bytes, double streamedMicros,
                            double cachedMicros) {
  std::vector<C::Call> calls;
  for (uint64_t i = 0; i < C::kPeriod; ++i) {
    const C::Call call = choice.next(bytes);
    calls.push_back(call);
    choice.record(call, bytes, call.streams ? streamedMicros : cachedMicros);
  }
  return calls;
}

TEST(CopyChoice, SizeClassesArePowersOfTwoFromTheStreamingThreshold) {
  EXPECT_EQ(C::sizeClassOf(0), -1);
  EXPECT_EQ(C::sizeClassOf(4095), -1);
  EXPECT_EQ(C::sizeClassOf(4096), 0);
  EXPECT_EQ(C::sizeClassOf(8191), 0);
  EXPECT_EQ(C::sizeClassOf(8192), 1);
  EXPECT_EQ(C::sizeClassOf(1 << 20), 8);
  EXPECT_EQ(C::sizeClassOf(int64_t{1} << 40), C::kClasses - 1);
}

TEST(CopyChoice, SmallCallsAreNeverTrialsAndNeverStream) {
  CopyChoice choice;
  for (int i = 0; i < 2000; ++i) {
    const C::Call call = choice.next(4095);
    EXPECT_FALSE(call.trial);
    EXPECT_EQ(call.sizeClass, -1);
  }
}

TEST(CopyChoice, TrialsSitAtFixedPlacesOfEveryPeriodStreamedFirst) {
  CopyChoice choice;
  for (int p = 0; p < 3; ++p) {
    const std::vector<C::Call> calls = period(choice, 1 << 20, 1.0, 1.0);
    for (uint64_t i = 0; i < C::kPeriod; ++i) {
      const bool trial = i >= C::kFirstTrial && i < C::kFirstTrial + 2 * C::kTrials;
      ASSERT_EQ(calls[i].trial, trial) << "call " << i << " of period " << p;
      if (trial) EXPECT_EQ(calls[i].streams, i < C::kFirstTrial + C::kTrials) << "call " << i;
    }
  }
}

TEST(CopyChoice, TheUntriedCallsFollowTheFasterMethodAndSwitchWhenItChanges) {
  CopyChoice fresh;
  const int64_t bytes = 1 << 20;
  // Before any trial: streamed.
  EXPECT_TRUE(fresh.next(bytes).streams);
  CopyChoice choice;
  std::vector<C::Call> calls = period(choice, bytes, 300.0, 140.0);  // cached faster
  EXPECT_FALSE(choice.streamsNow(bytes));
  EXPECT_TRUE(calls[C::kPeriod - 1].streams == false);
  calls = period(choice, bytes, 140.0, 300.0);  // streamed faster now
  EXPECT_TRUE(choice.streamsNow(bytes));
  EXPECT_TRUE(calls[C::kPeriod - 1].streams);
  // The calls between the two decisions followed the first one.
  EXPECT_FALSE(calls[0].streams);
}

TEST(CopyChoice, TheStartIsFollowedUntilTheTrialsDecide) {
  const int64_t bytes = 2 << 20;
  CopyChoice cached;
  cached.startWith(false);
  EXPECT_FALSE(cached.startsStreamed());
  for (uint64_t i = 0; i < C::kFirstTrial; ++i) {
    const C::Call call = cached.next(bytes);
    ASSERT_FALSE(call.trial);
    ASSERT_FALSE(call.streams) << "call " << i;
  }
  // Every class starts so, not only the one asked first.
  EXPECT_FALSE(cached.streamsNow(4096));
  EXPECT_FALSE(cached.streamsNow(int64_t{1} << 40));
  // The trials still run both ways and overrule the start: streamed faster here.
  CopyChoice corrected;
  corrected.startWith(false);
  const std::vector<C::Call> calls = period(corrected, bytes, 100.0, 300.0);
  EXPECT_TRUE(calls[C::kFirstTrial].trial && calls[C::kFirstTrial].streams);
  EXPECT_TRUE(corrected.streamsNow(bytes));
  EXPECT_TRUE(calls[C::kPeriod - 1].streams);
}

TEST(CopyChoice, ALateTrialDoesNotDecideTheFastestDoes) {
  CopyChoice choice;
  const int64_t bytes = 256 << 10;
  for (uint64_t i = 0; i < C::kPeriod; ++i) {
    const C::Call call = choice.next(bytes);
    double micros = call.streams ? 50.0 : 80.0;
    // The first streamed trial waited for a late peer: 10x its transfer.
    if (call.trial && call.streams && i == C::kFirstTrial) micros = 500.0;
    choice.record(call, bytes, micros);
  }
  EXPECT_TRUE(choice.streamsNow(bytes));
}

TEST(CopyChoice, TimesArePerByteAndClassesAreIndependent) {
  CopyChoice choice;
  period(choice, 64 << 10, 30.0, 10.0);  // 64 KiB: cached faster
  period(choice, 4 << 20, 10.0, 30.0);   // 4 MiB: streamed faster
  EXPECT_FALSE(choice.streamsNow(64 << 10));
  EXPECT_TRUE(choice.streamsNow(4 << 20));
  // Within one class, calls of different sizes compare per byte: a streamed trial of twice the
  // bytes in 1.5x the time is the faster one.
  CopyChoice mixed;
  for (uint64_t i = 0; i < C::kPeriod; ++i) {
    const int64_t b = (i % 2 == 0) ? (1 << 20) : (1 << 20) + (1 << 19);
    const C::Call call = mixed.next(b);
    const double perByteMicros = call.streams ? 1.0e-4 : 1.5e-4;
    mixed.record(call, b, perByteMicros * static_cast<double>(b));
  }
  EXPECT_TRUE(mixed.streamsNow(1 << 20));
}

TEST(CopyChoice, UntimedTrialsAreMadeUpInTheNextPeriod) {
  CopyChoice choice;
  const int64_t bytes = 1 << 20;
  // First period: the cached trials fail (nothing recorded): no decision yet.
  for (uint64_t i = 0; i < C::kPeriod; ++i) {
    const C::Call call = choice.next(bytes);
    if (call.streams) choice.record(call, bytes, 300.0);
  }
  EXPECT_TRUE(choice.streamsNow(bytes));
  period(choice, bytes, 300.0, 100.0);
  EXPECT_FALSE(choice.streamsNow(bytes));
}

// Through a group: every prepared call asks the choice at prepare, the trials' times reach it at
// the end of run, and the results are right whichever way each call copied.
TEST(CommunicatorCopyChoice, APreparedCallsTrialsAreTimedAndEveryWayGivesTheSum) {
  using namespace testing_support;
  const int n = 2;
  const int64_t count = 64 * 1024;  // 256 KiB of float32: the ring, through the FIFOs
  const int64_t bytes = count * 4;
  CommOptions opts = smallSlotOptions();
  opts.slotBytes = 64 * 1024;
  const uint64_t calls = C::kFirstTrial + 2 * C::kTrials + 2;
  auto outcomes = runGroup(n, [&](Communicator& comm) {
    const int r = comm.rank();
    for (uint64_t seq = 0; seq < calls; ++seq) {
      auto data = buffer(DType::Float32, count, [&](int64_t i) { return linearValue(r, i); });
      const PreparedCall p =
          comm.prepare(CollectiveArgs::allReduce(count, DType::Float32, RedOp::Sum, 1.0), seq);
      EXPECT_EQ(p.copy.trial, seq >= C::kFirstTrial && seq < C::kFirstTrial + 2 * C::kTrials)
          << "call " << seq;
      comm.run(p, data.data(), data.data(), call(seq));
      ASSERT_EQ(firstMismatch(DType::Float32, data.data(), count,
                              [&](int64_t i) { return linearSum(n, i); }), -1)
          << "call " << seq << (p.copy.streams ? " (streamed)" : " (cached)");
    }
    EXPECT_EQ(comm.copyChoice().trialsTimed(bytes), 2 * C::kTrials);
  }, opts);
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_TRUE(outcomes[r].ok()) << "rank " << r << ": " << outcomes[r].message();
  }
}

}  // namespace
}  // namespace ring
