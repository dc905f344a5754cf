// What the ring kernel's publish costs in system-scope fences: per message sent, the block's
// barrier orders every thread's stores before thread 0's one fence and release (fences are
// cumulative in the PTX model; NCCL's one-thread fence after its barrier rests on the same
// rule). A fence in every thread would cost a system-wide drain per thread per step on a GPU.
// Counted by the host shim (kernels/host_shim.h), with the kernels run on host threads; that
// the ordering itself holds is what test_host_kernels.cc checks bit for bit, and
// scripts/tsan.sh under ThreadSanitizer.
#include <gtest/gtest.h>

#include <vector>

#include "comm_test_support.h"
#include "host_kernel_ring.h"
#include "kernel_case_space.h"
#include "kernels/host_shim.h"
#include "kernels/device_flags.cuh"
#include "schedule/ring_walk.h"

namespace ring {
namespace {

using namespace testing_support;

TEST(HostKernelFences, OneSystemFencePerBlockPerMessageSent) {
  for (int n : {2, 3}) {
    for (int channels : {1, 3}) {
      SCOPED_TRACE(testing::Message() << "world " << n << ", channels " << channels);
      const int64_t count = 20011;
      HostKernelRing ring(n, geometryFor(channels));
      const int64_t sliceElems = fifoMessageCapacity(ring.geometry()) / 4;
      int64_t messages = 0;
      for (int rank = 0; rank < n; ++rank) {
        for (int c = 0; c < channels; ++c) {
          int64_t sends = 0, receives = 0;
          walkMessages(WalkShape{Collective::AllReduce, n, rank, -1, count, channels, c,
                                 sliceElems},
                       &sends, &receives);
          messages += sends;
        }
      }
      ASSERT_GT(messages, 0);
      const Fingerprint fp =
          makeFingerprint(Collective::AllReduce, 0, count, DType::Float32, RedOp::Sum, -1);
      const uint64_t before = hostshim::systemFences.load();
      runRanks(n, [&](int rank) {
        std::vector<float> data(static_cast<size_t>(count), 1.0f);
        const std::string e = launchAllReduce(ring.peers(rank), ring.counters(rank), data.data(),
                                              count, DType::Float32, RedOp::Sum, 1.0, fp,
                                              RingWaitLimits{5ull * 1000 * 1000 * 1000}, nullptr);
        EXPECT_EQ(e, "");
        EXPECT_EQ(data[count - 1], static_cast<float>(n));
      });
      EXPECT_EQ(hostshim::systemFences.load() - before, static_cast<uint64_t>(messages));
    }
  }
}

// The abort word is host memory on a GPU (a PCIe read each time): a wait reads it at its
// kAbortCheckInterval-th poll and every as many after, never on its first miss.
TEST(HostKernelFences, AWaitReadsTheAbortWordOncePerCheckIntervalOfPolls) {
  uint64_t counter = 0;
  int32_t abortWord = 0;
  // A wait that never succeeds, the abort word down: it spins to its limit (2 ms), reading the
  // word once per interval of polls, exactly.
  uint64_t reads = hostshim::abortWordReads.load();
  uint64_t polls = hostshim::spinPolls.load();
  dev::WaitResult r = dev::waitAtLeast(&counter, 1, dev::WaitBounds{&abortWord, 2'000'000});
  reads = hostshim::abortWordReads.load() - reads;
  polls = hostshim::spinPolls.load() - polls;
  EXPECT_EQ(r.status, kDeviceSpinLimit);
  EXPECT_GT(polls, 0u);
  EXPECT_EQ(polls % dev::kAbortCheckInterval, 0u) << polls;
  EXPECT_EQ(reads, polls / dev::kAbortCheckInterval) << reads << " reads in " << polls << " polls";
  // The word up: noticed at the interval-th poll, with one read.
  abortWord = 1;
  reads = hostshim::abortWordReads.load();
  polls = hostshim::spinPolls.load();
  r = dev::waitAtLeast(&counter, 1, dev::WaitBounds{&abortWord, 60'000'000'000ull});
  EXPECT_EQ(r.status, kDeviceAborted);
  EXPECT_EQ(hostshim::abortWordReads.load() - reads, 1u);
  EXPECT_EQ(hostshim::spinPolls.load() - polls, dev::kAbortCheckInterval);
  // A counter already there: no poll, no read.
  counter = 1;
  reads = hostshim::abortWordReads.load();
  r = dev::waitAtLeast(&counter, 1, dev::WaitBounds{&abortWord, 60'000'000'000ull});
  EXPECT_EQ(r.status, kDeviceOk);
  EXPECT_EQ(hostshim::abortWordReads.load() - reads, 0u);
}

// Over a whole all_reduce of many pipeline steps: the kernels read the abort word once per
// block at their start, and in their waits at most once per interval of polls, however many
// of the steps' waits missed at first.
TEST(HostKernelFences, AnAllReduceReadsTheAbortWordAtItsStartAndRarelyInItsWaits) {
  const int n = 2, channels = 2;
  const int64_t count = 20011;
  HostKernelRing ring(n, geometryFor(channels));
  const Fingerprint fp =
      makeFingerprint(Collective::AllReduce, 0, count, DType::Float32, RedOp::Sum, -1);
  const uint64_t reads = hostshim::abortWordReads.load();
  const uint64_t polls = hostshim::spinPolls.load();
  runRanks(n, [&](int rank) {
    std::vector<float> data(static_cast<size_t>(count), 1.0f);
    const std::string e = launchAllReduce(ring.peers(rank), ring.counters(rank), data.data(),
                                          count, DType::Float32, RedOp::Sum, 1.0, fp,
                                          RingWaitLimits{5ull * 1000 * 1000 * 1000}, nullptr);
    EXPECT_EQ(e, "");
  });
  const uint64_t read = hostshim::abortWordReads.load() - reads;
  const uint64_t polled = hostshim::spinPolls.load() - polls;
  EXPECT_LE(read, static_cast<uint64_t>(n * channels) + polled / dev::kAbortCheckInterval)
      << read << " reads, " << polled << " polls";
}

}  // namespace
}  // namespace ring
