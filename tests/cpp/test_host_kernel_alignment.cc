// Which steps of a CUDA ring kernel move 16-byte units when the user's tensor does not start on
// a 16-byte boundary: a view at the same element on every rank (x[1:] of an aligned tensor, as
// FSDP's flat parameters and a bucket's views give) must take the wide path for all but each
// step's head and tail, and give the closed form's bits. Counted by the host shim (vectorUnits:
// one count per block and step), with the kernels run on host threads.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "comm_test_support.h"
#include "host_kernel_ring.h"
#include "kernel_case_space.h"
#include "kernels/host_shim.h"
#include "schedule/ring_walk.h"

namespace ring {
namespace {

using namespace testing_support;

// Elements one rank moves over all its blocks' steps, and its steps: what the kernel's blocks
// walk (ring_walk.h), so the bound below follows the schedule, not the kernel's own counting.
struct Moved {
  int64_t elements = 0;
  int64_t steps = 0;
};

Moved movedBy(const WalkShape& shape, int channels) {
  Moved m;
  WalkShape w = shape;
  for (int c = 0; c < channels; ++c) {
    w.channel = c;
    const int64_t length = walkLength(w);
    for (int64_t k = 0; k < length; ++k) {
      const Step s = walkStep(w, k);
      if (s.count == 0) continue;
      m.elements += s.count;
      m.steps += 1;
    }
  }
  return m;
}

// Storage for `count` elements of `esize` bytes starting `offsetBytes` past a 64-byte boundary.
struct OffsetBuffer {
  std::vector<unsigned char> bytes;
  unsigned char* data = nullptr;
  OffsetBuffer(int64_t count, int64_t esize, int64_t offsetBytes)
      : bytes(static_cast<size_t>(count * esize + 64 + offsetBytes)) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(bytes.data());
    data = bytes.data() + ((64 - base % 64) % 64) + offsetBytes;
  }
};

// An all_reduce SUM of int32 or int16 values whose sum is exact, on a view `offsetBytes` past a
// 16-byte boundary on every rank: the closed form's bits, and every element but each step's
// head and tail (fewer than 16 bytes each) moved in 16-byte units.
template <typename T>
void checkMisalignedAllReduce(DType dtype, int n, int channels, int64_t count,
                              int64_t offsetBytes) {
  SCOPED_TRACE(testing::Message() << "world " << n << ", channels " << channels << ", "
                                  << sizeof(T) << "-byte elements, offset " << offsetBytes);
  const int64_t esize = static_cast<int64_t>(sizeof(T));
  const int64_t perUnit = 16 / esize;
  HostKernelRing ring(n, geometryFor(channels));
  const int64_t sliceElems = fifoMessageCapacity(ring.geometry()) / esize;
  int64_t bound = 0;  // elements every rank together moves in 16-byte units, at least
  for (int rank = 0; rank < n; ++rank) {
    const Moved m = movedBy(
        WalkShape{Collective::AllReduce, n, rank, -1, count, channels, 0, sliceElems}, channels);
    bound += m.elements - 2 * (perUnit - 1) * m.steps;
  }
  ASSERT_GT(bound, count);  // the bound says something
  const Fingerprint fp = makeFingerprint(Collective::AllReduce, 0, count, dtype, RedOp::Sum, -1);
  const uint64_t before = hostshim::vectorUnits.load();
  runRanks(n, [&](int rank) {
    OffsetBuffer buf(count, esize, offsetBytes);
    T* x = reinterpret_cast<T*>(buf.data);
    for (int64_t i = 0; i < count; ++i) x[i] = static_cast<T>((rank + 1) * (i % 7));
    const std::string e = launchAllReduce(ring.peers(rank), ring.counters(rank), x, count, dtype,
                                          RedOp::Sum, 1.0, fp,
                                          RingWaitLimits{5ull * 1000 * 1000 * 1000}, nullptr);
    EXPECT_EQ(e, "");
    const int64_t ranksSum = static_cast<int64_t>(n) * (n + 1) / 2;
    for (int64_t i = 0; i < count; ++i) {
      const T want = static_cast<T>(ranksSum * (i % 7));
      if (x[i] != want) {
        ADD_FAILURE() << "rank " << rank << " element " << i << ": " << int64_t{x[i]}
                      << ", want " << int64_t{want};
        break;
      }
    }
  });
  const int64_t wide = static_cast<int64_t>(hostshim::vectorUnits.load() - before) * perUnit;
  EXPECT_GE(wide, bound) << wide << " of the ranks' elements moved 16 bytes at a time";
}

TEST(HostKernelAlignment, AViewOffTheBoundaryOnEveryRankStillMovesSixteenByteUnits) {
  for (int n : {2, 3}) {
    for (int channels : {1, 2}) {
      for (int64_t offset : {4, 8, 12}) {
        checkMisalignedAllReduce<int32_t>(DType::Int32, n, channels, 4099, offset);
      }
      checkMisalignedAllReduce<int16_t>(DType::Int16, n, channels, 4099, 2);
    }
  }
}

// The control: aligned buffers keep the wide path too (the same bound).
TEST(HostKernelAlignment, AlignedBuffersMoveSixteenByteUnits) {
  checkMisalignedAllReduce<int32_t>(DType::Int32, 3, 2, 4099, 0);
}

}  // namespace
}  // namespace ring
