// Plans run in a single-threaded simulator (plan_simulator.h): every rank's steps in lockstep
// over in-memory FIFOs, results checked against closed forms. The small slice sizes force many
// pipeline loops, where off-by-one errors in the schedule would show.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <vector>

#include "plan_simulator.h"
#include "schedule/ring_plan.h"

namespace ring {
namespace {

using sim::Outcome;
using sim::RankState;
using sim::RingSimulator;

enum class Kind { AllReduce, ReduceScatter, AllGather, AllGatherInPlace, Broadcast, Reduce };

const char* kindName(Kind k) {
  switch (k) {
    case Kind::AllReduce: return "allReduce";
    case Kind::ReduceScatter: return "reduceScatter";
    case Kind::AllGather: return "allGather";
    case Kind::AllGatherInPlace: return "allGather(in place)";
    case Kind::Broadcast: return "broadcast";
    case Kind::Reduce: return "reduce";
  }
  return "?";
}

struct Scenario {
  Kind kind;
  int n;
  int64_t count;  // per rank for reduce-scatter and all-gather
  int64_t slice;
  int root;
};

std::ostream& operator<<(std::ostream& os, const Scenario& s) {
  return os << kindName(s.kind) << " n=" << s.n << " count=" << s.count << " slice=" << s.slice
            << " root=" << s.root;
}

// Rank r's contribution at element i; distinct per rank so that a misrouted block shows.
int64_t value(int r, int64_t i) { return (r + 1) * 1000003 + 7 * i; }
int64_t sumOverRanks(int n, int64_t i) { return 1000003LL * n * (n + 1) / 2 + 7LL * n * i; }
constexpr int64_t kUntouched = -424242;

std::vector<int64_t> filled(int64_t count, const std::function<int64_t(int64_t)>& f) {
  std::vector<int64_t> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = f(i);
  return v;
}

std::vector<Step> planFor(const Scenario& s, int r) {
  switch (s.kind) {
    case Kind::AllReduce: return planAllReduce(s.n, r, s.count, s.slice);
    case Kind::ReduceScatter: return planReduceScatter(s.n, r, s.count, s.slice);
    case Kind::AllGather:
    case Kind::AllGatherInPlace: return planAllGather(s.n, r, s.count, s.slice);
    case Kind::Broadcast: return planBroadcast(s.n, r, s.root, s.count, s.slice);
    case Kind::Reduce: return planReduce(s.n, r, s.root, s.count, s.slice);
  }
  return {};
}

RankState setUp(const Scenario& s, int r) {
  RankState st;
  st.steps = planFor(s, r);
  const int64_t c = s.count, all = s.n * s.count;
  auto mine = [r](int64_t i) { return value(r, i); };
  auto untouched = [](int64_t) { return kUntouched; };
  switch (s.kind) {
    case Kind::AllReduce:
    case Kind::Broadcast:
      st.output = filled(c, mine);
      st.inputIsOutput = true;
      break;
    case Kind::ReduceScatter:
      st.input = filled(all, mine);
      st.output = filled(c, untouched);
      break;
    case Kind::AllGather:
      st.input = filled(c, mine);
      st.output = filled(all, untouched);
      break;
    case Kind::AllGatherInPlace:
      // The input is block `r` of the output, as FSDP passes it.
      st.output = filled(all, [&](int64_t i) { return i / c == r ? value(r, i % c) : kUntouched; });
      st.inputIsOutput = true;
      st.inputOffset = r * c;
      break;
    case Kind::Reduce:
      st.input = filled(c, mine);
      st.output = filled(c, untouched);
      break;
  }
  return st;
}

// First element of `got` that differs from expected(i), as a readable failure.
testing::AssertionResult matches(const std::vector<int64_t>& got,
                                 const std::function<int64_t(int64_t)>& expected, int64_t size) {
  if (static_cast<int64_t>(got.size()) != size) {
    return testing::AssertionFailure() << "size " << got.size() << " vs " << size;
  }
  for (int64_t i = 0; i < size; ++i) {
    if (got[static_cast<size_t>(i)] != expected(i)) {
      return testing::AssertionFailure() << "element " << i << ": " << got[static_cast<size_t>(i)]
                                         << " vs expected " << expected(i);
    }
  }
  return testing::AssertionSuccess();
}

void expectClosedForm(const Scenario& s, const RingSimulator& sim) {
  const int n = s.n;
  const int64_t c = s.count;
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE(testing::Message() << "rank " << r);
    const RankState& st = sim.rank(r);
    switch (s.kind) {
      case Kind::AllReduce:
        EXPECT_TRUE(matches(st.output, [&](int64_t i) { return sumOverRanks(n, i); }, c));
        break;
      case Kind::ReduceScatter:
        EXPECT_TRUE(matches(st.output, [&](int64_t i) { return sumOverRanks(n, r * c + i); }, c));
        EXPECT_TRUE(matches(st.input, [&](int64_t i) { return value(r, i); }, n * c))
            << "input must stay unmodified";
        break;
      case Kind::AllGather:
      case Kind::AllGatherInPlace:
        EXPECT_TRUE(matches(st.output, [&](int64_t i) { return value(int(i / c), i % c); }, n * c));
        break;
      case Kind::Broadcast:
        EXPECT_TRUE(matches(st.output, [&](int64_t i) { return value(s.root, i); }, c));
        break;
      case Kind::Reduce:
        if (r == s.root) {
          EXPECT_TRUE(matches(st.output, [&](int64_t i) { return sumOverRanks(n, i); }, c));
        } else {
          EXPECT_TRUE(matches(st.output, [](int64_t) { return kUntouched; }, c));
        }
        EXPECT_TRUE(matches(st.input, [&](int64_t i) { return value(r, i); }, c));
        break;
    }
  }
}

std::vector<Scenario> allScenarios(const std::vector<int64_t>& slices) {
  std::vector<Scenario> out;
  const Kind kinds[] = {Kind::AllReduce, Kind::ReduceScatter, Kind::AllGather,
                        Kind::AllGatherInPlace, Kind::Broadcast, Kind::Reduce};
  for (int n : {1, 2, 3, 4, 7, 8}) {
    std::set<int64_t> counts = {0, 1, n - 1, n + 1, 1009, 5000};
    for (int64_t count : counts) {
      for (int64_t slice : slices) {
        for (Kind k : kinds) {
          const bool rooted = k == Kind::Broadcast || k == Kind::Reduce;
          for (int root = 0; root < (rooted ? n : 1); ++root) {
            out.push_back(Scenario{k, n, count, slice, root});
          }
        }
      }
    }
  }
  return out;
}

RingSimulator simulate(const Scenario& s, size_t capacity) {
  std::vector<RankState> ranks;
  for (int r = 0; r < s.n; ++r) ranks.push_back(setUp(s, r));
  return RingSimulator(std::move(ranks), s.slice, capacity);
}

// With unbounded FIFOs every plan completes with the closed-form result, leaves no message
// behind, and, stepped fairly, never has more than two messages queued on a link: each rank
// alternates sends and receives, so one rank can run at most one message ahead of the next.
TEST(Plans, SimulatedResultsMatchClosedFormAndQueuesStayShallow) {
  for (const Scenario& s : allScenarios({1, 7, 64, 1 << 20})) {
    SCOPED_TRACE(testing::Message() << s);
    RingSimulator sim = simulate(s, 0);
    Outcome outcome = Outcome::Deadlocked;
    ASSERT_NO_THROW(outcome = sim.run());
    ASSERT_EQ(outcome, Outcome::Completed);
    expectClosedForm(s, sim);
    EXPECT_EQ(sim.messagesLeft(), 0u);
    EXPECT_LE(sim.maxDepth(), 2u);
    if (testing::Test::HasFailure()) return;  // one scenario's failures are enough to read
  }
}

int64_t countIf(const std::vector<Step>& steps, bool (*pred)(Prim)) {
  int64_t k = 0;
  for (const Step& st : steps) k += pred(st.prim) ? 1 : 0;
  return k;
}

// Every message rank r sends is received by r+1, and the ring collectives cost what
// ring_plan.h documents: 2(n-1) messages per loop for all-reduce, n-1 for the others.
TEST(Plans, MessagesSentMatchMessagesReceivedAndDocumentedCost) {
  for (const Scenario& s : allScenarios({1, 7, 1 << 20})) {
    SCOPED_TRACE(testing::Message() << s);
    for (int r = 0; r < s.n; ++r) {
      const int next = ringNext(r, s.n);
      const int64_t sent = countIf(planFor(s, r), primSends);
      EXPECT_EQ(sent, countIf(planFor(s, next), primReceives)) << "rank " << r << " -> " << next;
      const int64_t largest = s.kind == Kind::AllReduce ? chunkRange(s.count, s.n, 0).count : s.count;
      const int64_t loops = loopCount(largest, s.slice);
      if (s.kind == Kind::AllReduce) {
        EXPECT_EQ(sent, loops * 2 * (s.n - 1));
      } else if (s.kind != Kind::Broadcast && s.kind != Kind::Reduce) {
        EXPECT_EQ(sent, loops * (s.n - 1));
      }
    }
  }
}

// In the ring collectives (all ranks send around a cycle) each rank's running balance of
// messages sent minus received stays 0 or 1: it never sends a second message before receiving.
// Chains (broadcast, reduce) are exempt: their first rank only sends, and the last only receives.
TEST(Plans, RingPlansAlternateSendsAndReceives) {
  for (const Scenario& s : allScenarios({1, 7, 1 << 20})) {
    if (s.kind == Kind::Broadcast || s.kind == Kind::Reduce) continue;
    SCOPED_TRACE(testing::Message() << s);
    for (int r = 0; r < s.n; ++r) {
      int64_t balance = 0;
      for (const Step& st : planFor(s, r)) {
        balance -= primReceives(st.prim) ? 1 : 0;
        ASSERT_GE(balance, -1) << "rank " << r << " receives before sending";
        balance += primSends(st.prim) ? 1 : 0;
        ASSERT_GE(balance, 0) << "rank " << r;
        ASSERT_LE(balance, 1) << "rank " << r;
      }
      EXPECT_EQ(balance, 0) << "rank " << r;
    }
  }
}

// The shared-memory transport's FIFOs hold a fixed number of slots (at least two); with two,
// every plan must still complete, and with the right result.
TEST(Plans, TwoSlotFifosNeverDeadlock) {
  for (const Scenario& s : allScenarios({1, 64})) {
    SCOPED_TRACE(testing::Message() << s);
    RingSimulator sim = simulate(s, 2);
    Outcome outcome = Outcome::Deadlocked;
    ASSERT_NO_THROW(outcome = sim.run());
    ASSERT_EQ(outcome, Outcome::Completed);
    expectClosedForm(s, sim);
  }
}

// Why two slots are the minimum: a step that receives and sends holds the received slot until
// its own message is published, so when every rank of a cycle has sent and waits in such a
// step, one-slot FIFOs are all full and nobody can move. Chains always drain at their last rank
// and complete. (The simulator must detect the deadlock, not spin.)
TEST(Plans, OneSlotFifosDeadlockOnlyRingPlansThatForwardInACycle) {
  for (const Scenario& s : allScenarios({7})) {
    SCOPED_TRACE(testing::Message() << s);
    bool forwards = false;
    for (const Step& st : planFor(s, 0)) forwards |= primSends(st.prim) && primReceives(st.prim);
    const bool cycle = s.kind != Kind::Broadcast && s.kind != Kind::Reduce;
    RingSimulator sim = simulate(s, 1);
    Outcome outcome = Outcome::Deadlocked;
    ASSERT_NO_THROW(outcome = sim.run());
    if (cycle && forwards) {
      EXPECT_EQ(outcome, Outcome::Deadlocked);
    } else {
      ASSERT_EQ(outcome, Outcome::Completed);
      expectClosedForm(s, sim);
    }
  }
}

}  // namespace
}  // namespace ring
