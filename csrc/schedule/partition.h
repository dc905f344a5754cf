// The one partition function: which elements of a buffer belong to which chunk, and which
// sub-range of a chunk one pipeline step moves. The CPU executor, the C++ tests and the CUDA
// kernels all call these, so the bytes that go where are decided in exactly one place.
#pragma once

#include <cstdint>

#include "common/hostdevice.h"

namespace ring {

struct Range {
  int64_t offset;  // in elements
  int64_t count;   // in elements
};

// Balanced split of `count` elements into `parts` chunks: the first (count % parts) chunks get
// one extra element, so chunk sizes differ by at most one and every element is covered once.
RING_HOST_DEVICE Range chunkRange(int64_t count, int parts, int index) {
  int64_t base = count / parts;
  int64_t extra = count % parts;
  int64_t i = index;
  Range r;
  r.offset = i * base + (i < extra ? i : extra);
  r.count = base + (i < extra ? 1 : 0);
  return r;
}

// Number of pipeline loops needed so that no step moves more than `sliceElems` elements of any
// chunk. At least one loop, so even an empty collective exchanges one (empty) message per
// step: that is what lets a receiver check the sender's fingerprint for every collective.
RING_HOST_DEVICE int64_t loopCount(int64_t largestChunk, int64_t sliceElems) {
  if (largestChunk <= 0) return 1;
  return (largestChunk + sliceElems - 1) / sliceElems;
}

// The part of `chunk` that pipeline loop `loop` moves (possibly empty in the last loop).
RING_HOST_DEVICE Range sliceOf(Range chunk, int64_t sliceElems, int64_t loop) {
  Range r;
  int64_t start = loop * sliceElems;
  if (start >= chunk.count) {
    r.offset = chunk.offset + chunk.count;
    r.count = 0;
    return r;
  }
  int64_t left = chunk.count - start;
  r.offset = chunk.offset + start;
  r.count = left < sliceElems ? left : sliceElems;
  return r;
}

// Ring neighbours: data always flows from rank r to rank r+1.
RING_HOST_DEVICE int ringNext(int rank, int nranks) { return rank + 1 == nranks ? 0 : rank + 1; }
RING_HOST_DEVICE int ringPrev(int rank, int nranks) { return rank == 0 ? nranks - 1 : rank - 1; }
RING_HOST_DEVICE int modRank(int64_t x, int nranks) {
  int64_t m = x % nranks;
  return static_cast<int>(m < 0 ? m + nranks : m);
}

}  // namespace ring
