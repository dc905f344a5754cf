// Partition invariants: the arithmetic that decides which bytes every step moves. A gap or an
// overlap here silently drops or double-counts data in every collective, so each property is
// checked over odd world sizes and counts that do not divide evenly.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "schedule/partition.h"

namespace ring {
namespace {

const std::vector<int> kWorldSizes = {1, 2, 3, 4, 7, 8};
const std::vector<int64_t> kSliceSizes = {1, 7, 64, 1 << 20};

std::vector<int64_t> countsFor(int n) {
  std::set<int64_t> c = {0, 1, n - 1, n + 1, 1009, 1 << 20};
  return {c.begin(), c.end()};
}

// Chunks laid end to end, starting at 0 and ending at count, cover every element exactly once.
TEST(Partition, ChunksTileTheBufferWithSizesWithinOne) {
  for (int n : kWorldSizes) {
    for (int64_t count : countsFor(n)) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " count=" << count);
      int64_t expectedOffset = 0, smallest = count, largest = 0;
      for (int k = 0; k < n; ++k) {
        Range r = chunkRange(count, n, k);
        ASSERT_EQ(r.offset, expectedOffset) << "chunk " << k;
        ASSERT_GE(r.count, 0) << "chunk " << k;
        expectedOffset += r.count;
        smallest = std::min(smallest, r.count);
        largest = std::max(largest, r.count);
      }
      EXPECT_EQ(expectedOffset, count);
      EXPECT_LE(largest - smallest, 1);
      // Chunk 0 is the largest: plans size their loop count from it.
      EXPECT_EQ(chunkRange(count, n, 0).count, largest);
    }
  }
}

// Each chunk's slices, taken over loopCount loops, tile the chunk exactly and never exceed the
// slice size; and loopCount is minimal (the largest chunk's last loop is not empty).
TEST(Partition, SlicesTileEveryChunkWithinTheSliceSize) {
  for (int n : kWorldSizes) {
    for (int64_t count : countsFor(n)) {
      for (int64_t slice : kSliceSizes) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " count=" << count << " slice=" << slice);
        const int64_t largest = chunkRange(count, n, 0).count;
        const int64_t loops = loopCount(largest, slice);
        ASSERT_GE(loops, 1);
        if (largest > 0) {
          EXPECT_GT(sliceOf(chunkRange(count, n, 0), slice, loops - 1).count, 0);
        } else {
          EXPECT_EQ(loops, 1);
        }
        for (int k = 0; k < n; ++k) {
          Range chunk = chunkRange(count, n, k);
          int64_t next = chunk.offset;
          for (int64_t loop = 0; loop < loops; ++loop) {
            Range s = sliceOf(chunk, slice, loop);
            ASSERT_GE(s.count, 0);
            ASSERT_LE(s.count, slice);
            // An empty slice sits at the chunk's end; a non-empty one continues the last.
            ASSERT_EQ(s.offset, next) << "chunk " << k << " loop " << loop;
            next += s.count;
          }
          ASSERT_EQ(next, chunk.offset + chunk.count) << "chunk " << k;
        }
      }
    }
  }
}

// A slice index past the end of a chunk yields an empty range at the chunk's end, never an
// out-of-bounds one (plans of smaller chunks run the same number of loops as the largest).
TEST(Partition, SlicePastTheEndIsEmptyAtTheEnd) {
  Range chunk{100, 10};
  for (int64_t loop : {1, 2, 50}) {
    Range s = sliceOf(chunk, 10, loop);
    EXPECT_EQ(s.count, 0);
    EXPECT_EQ(s.offset, 110);
  }
  Range last = sliceOf(chunk, 4, 2);
  EXPECT_EQ(last.offset, 108);
  EXPECT_EQ(last.count, 2);
}

TEST(Partition, RingNeighboursAreInverseAndVisitEveryRank) {
  for (int n : kWorldSizes) {
    std::vector<int> seen(static_cast<size_t>(n), 0);
    int r = 0;
    for (int hop = 0; hop < n; ++hop) {
      ++seen[static_cast<size_t>(r)];
      EXPECT_EQ(ringNext(r, n), (r + 1) % n);
      EXPECT_EQ(ringPrev(ringNext(r, n), n), r);
      EXPECT_EQ(ringNext(ringPrev(r, n), n), r);
      r = ringNext(r, n);
    }
    EXPECT_EQ(r, 0) << "n hops return to the start";
    for (int v : seen) EXPECT_EQ(v, 1);
  }
}

// modRank is the mathematical modulus (never negative), used with offsets like rank - s.
TEST(Partition, ModRankIsNonNegativeAndCongruent) {
  for (int n : kWorldSizes) {
    for (int64_t x = -3 * n - 1; x <= 3 * n + 1; ++x) {
      int m = modRank(x, n);
      EXPECT_GE(m, 0);
      EXPECT_LT(m, n);
      EXPECT_EQ((x - m) % n, 0) << "x=" << x << " n=" << n;
    }
  }
  EXPECT_EQ(modRank(-1, 7), 6);
  EXPECT_EQ(modRank(int64_t{1} << 40, 8), 0);
}

}  // namespace
}  // namespace ring
