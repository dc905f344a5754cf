// waitUntil's spin and the core it holds (transport/wait.h, WaitContext::yieldWhileSpinning),
// and the group's choice of it (Communicator::waitContext). Where each rank has a core a spin
// must never hand that core over: beside busy processes the next thread on it keeps it for a
// scheduler slice. Where ranks share cores it must, now and then (the rank waited on may be the
// thread beside it). sched_yield is counted by interposition: this binary defines the C
// library's function, which std::this_thread::yield calls, counts the call and makes the system
// call itself, so the production code is measured as it is, without a seam of its own.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "comm_test_support.h"
#include "common/cpu_binding.h"
#include "executor/communicator_calls.h"
#include "transport/wait.h"

namespace {
std::atomic<long> yieldsMade{0};
}  // namespace

extern "C" int sched_yield() noexcept {
  yieldsMade.fetch_add(1, std::memory_order_relaxed);
  return static_cast<int>(syscall(SYS_sched_yield));
}

namespace ring {
namespace {

using namespace std::chrono_literals;
using namespace testing_support;

// sched_yield calls of every thread while one waits 20 ms for a counter, its spin budget
// (200 ms) far longer than that.
long yieldsWhileSpinning(bool yieldWhileSpinning) {
  std::atomic<uint64_t> word{0};
  std::atomic<uint32_t> sleepers{0};
  std::atomic<bool> waiting{false};
  long yields = -1;
  std::thread waiter([&] {
    WaitContext ctx;
    ctx.start = Clock::now();
    ctx.timeout = 10000ms;
    ctx.deadline = ctx.start + ctx.timeout;
    ctx.spinMicros = 200000;
    ctx.yieldWhileSpinning = yieldWhileSpinning;
    ctx.describe = [] { return std::string("wait spin test"); };
    const long before = yieldsMade.load();
    waiting = true;
    waitUntil(word, 1, sleepers, 1, "to publish", 1, ctx);
    yields = yieldsMade.load() - before;
  });
  while (!waiting) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  publishCounter(word, 1, sleepers);
  waiter.join();
  return yields;
}

TEST(WaitSpin, AWaiterWithACoreOfItsOwnNeverYieldsIt) {
  EXPECT_EQ(yieldsWhileSpinning(false), 0);
}

TEST(WaitSpin, AWaiterWhoseRanksShareCoresYieldsNowAndThen) {
  // The same count sees the yields where they are wanted (so the test above can fail): one
  // every 64 pauses, thousands in 20 ms.
  EXPECT_GT(yieldsWhileSpinning(true), 100);
}

TEST(WaitSpin, AGroupWhoseRanksEachHaveACoreWaitsWithoutYielding) {
  // Two ranks on a machine with two usable cores or more: the long spin, without yields;
  // more ranks than cores: the short spin, with them (chooseSpin in executor/group_setup.cc).
  const int cores = std::max<int>(1, static_cast<int>(processCpuBinder().usable().size()));
  for (const int n : {2, cores + 1}) {
    if (n == 2 && cores < 2) continue;
    const auto outcomes = runGroup(n, [&](Communicator& comm) {
      Fingerprint fp;
      const CallInfo call{1, 5000ms};
      const WaitContext ctx = comm.waitContext(fp, call);
      const bool ownCore = n <= cores;
      EXPECT_EQ(ctx.yieldWhileSpinning, !ownCore) << n << " ranks, " << cores << " cores";
      EXPECT_EQ(ctx.spinMicros >= 500, ownCore) << ctx.spinMicros;
    });
    for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok()) << o.message();
  }
}

TEST(WaitSpin, TheCallersPatienceWithACoreOfItsOwnNeverYields) {
  // The caller asks whether its peers have issued a call none has (Communicator::allIssued):
  // it looks for the whole patience, 5 ms, without a yield where each rank has a core.
  const int cores = std::max<int>(1, static_cast<int>(processCpuBinder().usable().size()));
  if (cores < 2) GTEST_SKIP() << "needs two usable cores";
  const auto outcomes = runGroup(2, [&](Communicator& comm) {
    if (comm.rank() != 0) {  // the peer issues nothing, and does nothing, meanwhile
      std::this_thread::sleep_for(50ms);
      return;
    }
    const long before = yieldsMade.load();
    EXPECT_FALSE(comm.allIssued(5, std::chrono::microseconds(5000)));
    EXPECT_EQ(yieldsMade.load() - before, 0);
  });
  for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok()) << o.message();
}

}  // namespace
}  // namespace ring
