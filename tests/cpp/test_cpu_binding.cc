// TORCH_RING_CPU_BIND=core's binder (common/cpu_binding.h), against what sched_setaffinity(2)
// documents: a thread's mask is its own (binding one thread leaves the others as they were),
// and a thread inherits the mask of the thread that creates it. Each case binds a thread of
// its own, never the test's main thread.
#include <gtest/gtest.h>
#include <sched.h>

#include <string>
#include <thread>
#include <vector>

#include "common/cpu_binding.h"

namespace ring {
namespace {

template <typename Fn>
void onNewThread(Fn fn) {
  std::thread t(fn);
  t.join();
}

TEST(CpuBinding, BindsTheCallingThreadToTheCpuOfItsLocalIndexOnce) {
  const std::vector<int> cpus = threadCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs, this thread may use " << cpus.size();
  const int last = static_cast<int>(cpus.size()) - 1;
  onNewThread([&] {
    CpuBinder binder;
    EXPECT_EQ(binder.usable(), cpus);
    bool bound = false;
    const std::string what = binder.bindOnce(last, last + 1, &bound);
    EXPECT_TRUE(bound) << what;
    EXPECT_EQ(threadCpus(), std::vector<int>{cpus.back()}) << what;
    EXPECT_NE(what.find("bound this thread to CPU " + std::to_string(cpus.back())),
              std::string::npos) << what;
    // The CPUs the process had, not the one the thread now has: what a later group counts.
    EXPECT_EQ(binder.usable(), cpus);
    // A second group of the process changes nothing.
    const std::string again = binder.bindOnce(0, last + 1, &bound);
    EXPECT_TRUE(bound);
    EXPECT_EQ(threadCpus(), std::vector<int>{cpus.back()}) << again;
    EXPECT_NE(again.find("already bound to CPU " + std::to_string(cpus.back())),
              std::string::npos) << again;
  });
  // The test's own thread was never bound.
  EXPECT_EQ(threadCpus(), cpus);
}

TEST(CpuBinding, AThreadStartedByABoundThreadRunsOnTheSameCpu) {
  const std::vector<int> cpus = threadCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs, this thread may use " << cpus.size();
  onNewThread([&] {
    CpuBinder binder;
    bool bound = false;
    binder.bindOnce(1, 2, &bound);
    ASSERT_TRUE(bound);
    std::vector<int> child;
    onNewThread([&] { child = threadCpus(); });
    EXPECT_EQ(child, std::vector<int>{cpus[1]});
  });
}

TEST(CpuBinding, RanksThatOutnumberTheCpusAreNotBound) {
  const std::vector<int> cpus = threadCpus();
  const int ranks = static_cast<int>(cpus.size()) + 1;
  onNewThread([&] {
    CpuBinder binder;
    bool bound = true;
    const std::string what = binder.bindOnce(0, ranks, &bound);
    EXPECT_FALSE(bound) << what;
    EXPECT_EQ(threadCpus(), cpus) << what;
    EXPECT_NE(what.find("the " + std::to_string(ranks) + " ranks of this host share " +
                        std::to_string(cpus.size()) + " CPU(s)"),
              std::string::npos) << what;
    EXPECT_NE(what.find("not bound"), std::string::npos) << what;
    EXPECT_EQ(binder.usable(), cpus);
  });
}

TEST(CpuBinding, ThreadCpusReadsTheMaskSchedSetaffinitySet) {
  const std::vector<int> cpus = threadCpus();
  ASSERT_FALSE(cpus.empty());
  onNewThread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus.front(), &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    EXPECT_EQ(threadCpus(), std::vector<int>{cpus.front()});
  });
}

}  // namespace
}  // namespace ring
