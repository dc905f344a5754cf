#include "schedule/ring_plan.h"

#include "common/errors.h"

namespace ring {

const char* primName(Prim p) {
  switch (p) {
    case Prim::Send: return "send";
    case Prim::RecvReduceSend: return "recvReduceSend";
    case Prim::RecvReduceCopySend: return "recvReduceCopySend";
    case Prim::RecvReduceCopy: return "recvReduceCopy";
    case Prim::RecvCopySend: return "recvCopySend";
    case Prim::Recv: return "recv";
    case Prim::Copy: return "copy";
  }
  return "unknown-prim";
}

namespace {

void checkShape(int nranks, int rank, int64_t count, int64_t sliceElems) {
  RING_ASSERT(nranks >= 1 && rank >= 0 && rank < nranks, "nranks ", nranks, " rank ", rank);
  RING_ASSERT(count >= 0 && sliceElems >= 1, "count ", count, " slice ", sliceElems);
}

Step at(Prim p, Range r) { return Step{p, r.offset, r.offset, r.count}; }

}  // namespace

// Why this order: in reduce-scatter step s, rank r forwards the partial sum of chunk r-s that
// it received in step s-1, so each chunk travels once around the ring collecting one
// contribution per hop; after n-1 hops chunk r+1 is complete at rank r. The all-gather half
// then circulates each completed chunk n-1 hops. Each chunk is reduced in one fixed order
// (starting at its owner), then copied verbatim: every rank ends with identical bits.
std::vector<Step> planAllReduce(int nranks, int rank, int64_t count, int64_t sliceElems) {
  checkShape(nranks, rank, count, sliceElems);
  std::vector<Step> steps;
  if (nranks == 1) return steps;
  const int n = nranks;
  const int64_t loops = loopCount(chunkRange(count, n, 0).count, sliceElems);
  steps.reserve(static_cast<size_t>(loops) * (2 * n - 1));
  for (int64_t loop = 0; loop < loops; ++loop) {
    auto slice = [&](int64_t k) {
      return sliceOf(chunkRange(count, n, modRank(k, n)), sliceElems, loop);
    };
    steps.push_back(at(Prim::Send, slice(rank)));
    for (int s = 1; s <= n - 2; ++s) steps.push_back(at(Prim::RecvReduceSend, slice(rank - s)));
    steps.push_back(at(Prim::RecvReduceCopySend, slice(rank + 1)));
    for (int k = 0; k <= n - 3; ++k) steps.push_back(at(Prim::RecvCopySend, slice(rank - k)));
    steps.push_back(at(Prim::Recv, slice(rank + 2)));
  }
  return steps;
}

// Same circulation as the first half of all-reduce, shifted by one chunk so that the chunk
// completing at rank r is block r, written to the (separate) output buffer.
std::vector<Step> planReduceScatter(int nranks, int rank, int64_t countPerRank,
                                    int64_t sliceElems) {
  checkShape(nranks, rank, countPerRank, sliceElems);
  std::vector<Step> steps;
  const int n = nranks;
  const int64_t loops = loopCount(countPerRank, sliceElems);
  for (int64_t loop = 0; loop < loops; ++loop) {
    auto slice = [&](int64_t k) {
      Range block{modRank(k, n) * countPerRank, countPerRank};
      return sliceOf(block, sliceElems, loop);
    };
    if (n == 1) {
      Range r = slice(0);
      steps.push_back(Step{Prim::Copy, r.offset, r.offset, r.count});
      continue;
    }
    steps.push_back(at(Prim::Send, slice(rank - 1)));
    for (int s = 1; s <= n - 2; ++s) {
      steps.push_back(at(Prim::RecvReduceSend, slice(rank - 1 - s)));
    }
    Range mine = slice(rank);
    steps.push_back(Step{Prim::RecvReduceCopy, mine.offset, mine.offset - rank * countPerRank,
                         mine.count});
  }
  return steps;
}

// Each rank copies its own block into place and sends it on; block r-k arrives at step k and
// is forwarded unless this rank is the last one it must reach (rank r-1's successor chain).
std::vector<Step> planAllGather(int nranks, int rank, int64_t countPerRank, int64_t sliceElems) {
  checkShape(nranks, rank, countPerRank, sliceElems);
  std::vector<Step> steps;
  const int n = nranks;
  const int64_t loops = loopCount(countPerRank, sliceElems);
  for (int64_t loop = 0; loop < loops; ++loop) {
    auto slice = [&](int64_t k) {
      Range block{modRank(k, n) * countPerRank, countPerRank};
      return sliceOf(block, sliceElems, loop);
    };
    Range mine = slice(rank);
    int64_t inOffset = mine.offset - rank * countPerRank;
    steps.push_back(Step{Prim::Copy, inOffset, mine.offset, mine.count});
    if (n == 1) continue;
    steps.push_back(Step{Prim::Send, inOffset, mine.offset, mine.count});
    for (int k = 1; k <= n - 2; ++k) steps.push_back(at(Prim::RecvCopySend, slice(rank - k)));
    steps.push_back(at(Prim::Recv, slice(rank - (n - 1))));
  }
  return steps;
}

// A chain rather than a tree: on a ring every link carries the payload once, and pipelining
// in slices keeps all links busy, so large broadcasts approach one link's bandwidth.
std::vector<Step> planBroadcast(int nranks, int rank, int root, int64_t count,
                                int64_t sliceElems) {
  checkShape(nranks, rank, count, sliceElems);
  RING_ASSERT(root >= 0 && root < nranks, "root ", root);
  std::vector<Step> steps;
  if (nranks == 1) return steps;
  const int position = modRank(rank - root, nranks);
  const Prim prim = position == 0             ? Prim::Send
                    : position == nranks - 1  ? Prim::Recv
                                              : Prim::RecvCopySend;
  const int64_t loops = loopCount(count, sliceElems);
  for (int64_t loop = 0; loop < loops; ++loop) {
    steps.push_back(at(prim, sliceOf(Range{0, count}, sliceElems, loop)));
  }
  return steps;
}

// The chain starts after the root so that it ends there; every hop adds one contribution, in
// the same order for every slice.
std::vector<Step> planReduce(int nranks, int rank, int root, int64_t count, int64_t sliceElems) {
  checkShape(nranks, rank, count, sliceElems);
  RING_ASSERT(root >= 0 && root < nranks, "root ", root);
  std::vector<Step> steps;
  const int position = modRank(rank - root - 1, nranks);
  const int64_t loops = loopCount(count, sliceElems);
  for (int64_t loop = 0; loop < loops; ++loop) {
    Range r = sliceOf(Range{0, count}, sliceElems, loop);
    if (nranks == 1) {
      steps.push_back(at(Prim::Copy, r));
    } else if (position == 0) {
      steps.push_back(at(Prim::Send, r));
    } else if (position == nranks - 1) {
      steps.push_back(at(Prim::RecvReduceCopy, r));
    } else {
      steps.push_back(at(Prim::RecvReduceSend, r));
    }
  }
  return steps;
}

}  // namespace ring
