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

// Steps [from, to) of every all-reduce loop (ring_steps.h). keep: the step that completes this
// rank's chunk keeps it (recvReduceCopy) instead of sending it on; lead: each loop begins by
// sending that chunk (what the kept step would have sent).
std::vector<Step> allReduceLoops(int nranks, int rank, int64_t count, int64_t sliceElems, int from,
                                 int to, bool keep, bool lead) {
  checkShape(nranks, rank, count, sliceElems);
  std::vector<Step> steps;
  if (nranks == 1) return steps;
  const int n = nranks;
  const int64_t loops = loopCount(chunkRange(count, n, 0).count, sliceElems);
  const Range owned = chunkRange(count, n, modRank(rank + 1, n));
  steps.reserve(static_cast<size_t>(loops) * static_cast<size_t>(to - from + (lead ? 1 : 0)));
  for (int64_t loop = 0; loop < loops; ++loop) {
    if (lead) steps.push_back(at(Prim::Send, sliceOf(owned, sliceElems, loop)));
    for (int i = from; i < to; ++i) {
      StepShape s = allReduceStep(n, rank, i);
      const Prim p = keep && s.prim == Prim::RecvReduceCopySend ? Prim::RecvReduceCopy : s.prim;
      steps.push_back(at(p, sliceOf(chunkRange(count, n, s.chunk), sliceElems, loop)));
    }
  }
  return steps;
}

}  // namespace

// Why this order: in reduce-scatter step s, rank r forwards the partial sum of chunk r-s that
// it received in step s-1, so each chunk travels once around the ring collecting one
// contribution per hop; after n-1 hops chunk r+1 is complete at rank r. The all-gather half
// then circulates each completed chunk n-1 hops. Each chunk is reduced in one fixed order
// (starting at its owner), then copied verbatim: every rank ends with identical bits.
// The per-step choice lives in ring_steps.h, shared with the CUDA kernels.
std::vector<Step> planAllReduce(int nranks, int rank, int64_t count, int64_t sliceElems) {
  return allReduceLoops(nranks, rank, count, sliceElems, 0, allReduceStepsPerLoop(nranks), false,
                        false);
}

// Steps 0 .. n-1 of each all-reduce loop, the last one keeping its chunk instead of sending it
// on; then, in a plan of its own, that chunk's send and steps n .. 2n-2.
std::vector<Step> planAllReduceReduceHalf(int nranks, int rank, int64_t count,
                                          int64_t sliceElems) {
  return allReduceLoops(nranks, rank, count, sliceElems, 0, nranks, true, false);
}

std::vector<Step> planAllReduceGatherHalf(int nranks, int rank, int64_t count,
                                          int64_t sliceElems) {
  return allReduceLoops(nranks, rank, count, sliceElems, nranks, allReduceStepsPerLoop(nranks),
                        false, true);
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
    auto slice = [&](int k) { return sliceOf(Range{k * countPerRank, countPerRank}, sliceElems, loop); };
    if (n == 1) {
      Range r = slice(0);
      steps.push_back(Step{Prim::Copy, r.offset, r.offset, r.count});
      continue;
    }
    for (int i = 0; i < n; ++i) {
      StepShape s = reduceScatterStep(n, rank, i);
      Range r = slice(s.chunk);
      // The completed block goes to the output, which holds only this rank's block.
      int64_t dst = s.prim == Prim::RecvReduceCopy ? r.offset - rank * countPerRank : r.offset;
      steps.push_back(Step{s.prim, r.offset, dst, r.count});
    }
  }
  return steps;
}

// Each rank copies its own block into place and sends it on; block r-k arrives at step k and
// is forwarded unless this rank is the last one it must reach.
std::vector<Step> planAllGather(int nranks, int rank, int64_t countPerRank, int64_t sliceElems) {
  checkShape(nranks, rank, countPerRank, sliceElems);
  std::vector<Step> steps;
  const int n = nranks;
  const int64_t loops = loopCount(countPerRank, sliceElems);
  const int perLoop = n == 1 ? 1 : allGatherStepsPerLoop(n);
  for (int64_t loop = 0; loop < loops; ++loop) {
    for (int i = 0; i < perLoop; ++i) {
      StepShape s = allGatherStep(n, rank, i);
      Range r = sliceOf(Range{s.chunk * countPerRank, countPerRank}, sliceElems, loop);
      // Own block: read from the input (which holds only this block), write in place.
      int64_t src = s.chunk == rank ? r.offset - rank * countPerRank : r.offset;
      steps.push_back(Step{s.prim, src, r.offset, r.count});
    }
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
  const Prim prim = broadcastPrim(nranks, rank, root);
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
  const Prim prim = nranks == 1 ? Prim::Copy : reducePrim(nranks, rank, root);
  const int64_t loops = loopCount(count, sliceElems);
  for (int64_t loop = 0; loop < loops; ++loop) {
    steps.push_back(at(prim, sliceOf(Range{0, count}, sliceElems, loop)));
  }
  return steps;
}

}  // namespace ring
