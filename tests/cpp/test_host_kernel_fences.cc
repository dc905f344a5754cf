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

}  // namespace
}  // namespace ring
