// The CUDA kernels' walk through a ring schedule: step k of one channel, computed on the fly
// (a kernel has no room for a vector of steps) from the same per-step functions (ring_steps.h)
// and partition arithmetic (partition.h) that the CPU planner (ring_plan.cc) turns into
// vectors, as the same Step type. Compiled for host and device, so the host tests compare this
// walk with planAllReduce & co. step by step.
//
// Channels: a collective runs as `channels` independent rings (one CUDA block each), each over
// its own part of every chunk the CPU plan cuts:
//  - all-reduce: channel c owns part c of each chunk k = chunkRange(count, nranks, k). Why not
//    a contiguous range per channel: an element's chunk decides where its ring reduction
//    starts, so the order its contributions are added in; cut this way, every element keeps
//    the CPU plan's chunk, and the kernels end with the CPU executor's bits for any channel
//    count (floating-point sums depend on that order);
//  - reduce-scatter, all-gather: channel c owns chunkRange(count, channels, c) of each rank's
//    block (the chunks are the blocks, so the order is the CPU plan's already);
//  - broadcast: channel c owns chunkRange(count, channels, c) of the buffer (nothing is added).
// Each channel walks the CPU plan's steps over its parts; with one channel the walk IS the CPU
// plan.
#pragma once

#include <cstdint>

#include "common/hostdevice.h"
#include "common/types.h"
#include "schedule/partition.h"
#include "schedule/ring_steps.h"

namespace ring {

struct WalkShape {
  Collective kind;   // AllReduce, ReduceScatter, AllGather or Broadcast
  int nranks;
  int rank;
  int root;          // Broadcast only
  int64_t count;     // AllReduce / Broadcast: elements of the buffer; RS / AG: elements per rank
  int channels;
  int channel;
  int64_t sliceElems;  // elements per message (slot bytes / element size)
};

RING_HOST_DEVICE Range walkChannelRange(const WalkShape& w) {
  return chunkRange(w.count, w.channels, w.channel);
}

// Primitives per pipeline loop; the same numbers as the CPU plans (0: nothing to do).
RING_HOST_DEVICE int walkStepsPerLoop(const WalkShape& w) {
  const int n = w.nranks;
  switch (w.kind) {
    case Collective::AllReduce: return n == 1 ? 0 : allReduceStepsPerLoop(n);
    case Collective::ReduceScatter: return n == 1 ? 1 : reduceScatterStepsPerLoop(n);
    case Collective::AllGather: return n == 1 ? 1 : allGatherStepsPerLoop(n);
    case Collective::Broadcast: return n == 1 ? 0 : 1;
    default: return 0;
  }
}

// All-reduce: channel w.channel's part of chunk `chunk` of the whole buffer.
RING_HOST_DEVICE Range walkAllReducePart(const WalkShape& w, int chunk) {
  const Range whole = chunkRange(w.count, w.nranks, chunk);
  const Range part = chunkRange(whole.count, w.channels, w.channel);
  Range r;
  r.offset = whole.offset + part.offset;
  r.count = part.count;
  return r;
}

RING_HOST_DEVICE int64_t walkLoops(const WalkShape& w) {
  // Chunk 0 is the largest chunk, and a channel's part of it the largest of its parts.
  if (w.kind == Collective::AllReduce) return loopCount(walkAllReducePart(w, 0).count, w.sliceElems);
  return loopCount(walkChannelRange(w).count, w.sliceElems);
}

RING_HOST_DEVICE int64_t walkLength(const WalkShape& w) {
  return walkLoops(w) * walkStepsPerLoop(w);
}

// Step `index` (0 .. walkLength-1) of channel w.channel on rank w.rank.
RING_HOST_DEVICE Step walkStep(const WalkShape& w, int64_t index) {
  const int perLoop = walkStepsPerLoop(w);
  const int64_t loop = index / perLoop;
  const int i = static_cast<int>(index % perLoop);
  const int n = w.nranks;
  const Range chan = walkChannelRange(w);
  Step out;
  switch (w.kind) {
    case Collective::AllReduce: {
      // The channel's part of chunk k, as planAllReduce cuts the whole buffer.
      const StepShape s = allReduceStep(n, w.rank, i);
      const Range r = sliceOf(walkAllReducePart(w, s.chunk), w.sliceElems, loop);
      out.prim = s.prim;
      out.src = r.offset;
      out.dst = out.src;
      out.count = r.count;
      return out;
    }
    case Collective::ReduceScatter: {
      // Block k of the input is [k * count, (k+1) * count); the channel owns the same
      // sub-range of every block, and of the output (which holds one block).
      const Range r = sliceOf(Range{0, chan.count}, w.sliceElems, loop);
      if (n == 1) {
        out.prim = Prim::Copy;
        out.src = chan.offset + r.offset;
        out.dst = out.src;
        out.count = r.count;
        return out;
      }
      const StepShape s = reduceScatterStep(n, w.rank, i);
      out.prim = s.prim;
      out.src = s.chunk * w.count + chan.offset + r.offset;
      out.dst = s.prim == Prim::RecvReduceCopy ? chan.offset + r.offset : out.src;
      out.count = r.count;
      return out;
    }
    case Collective::AllGather: {
      // The input holds only this rank's block; block k of the output is [k * count, ...).
      const StepShape s = allGatherStep(n, w.rank, i);
      const Range r = sliceOf(Range{0, chan.count}, w.sliceElems, loop);
      out.prim = s.prim;
      out.dst = s.chunk * w.count + chan.offset + r.offset;
      out.src = s.chunk == w.rank ? chan.offset + r.offset : out.dst;
      out.count = r.count;
      return out;
    }
    default: {  // Broadcast: the chain root -> root+1 -> ... -> root-1, in place
      const Range r = sliceOf(chan, w.sliceElems, loop);
      out.prim = broadcastPrim(n, w.rank, w.root);
      out.src = r.offset;
      out.dst = r.offset;
      out.count = r.count;
      return out;
    }
  }
}

// Where a step's data sits in the collective's own coordinates, in elements: the position in
// the input for reduce-scatter (every rank holds all blocks there), else in the output (the
// all-gather output, the all-reduce / broadcast buffer). A message's sender and its receiver
// compute the same position for it (test_cuda_walk.cc checks this), so both can place the
// message alike in its slot (fifoMessageShift).
RING_HOST_DEVICE int64_t walkDataPosition(const WalkShape& w, const Step& s) {
  return w.kind == Collective::ReduceScatter ? s.src : s.dst;
}

// Messages channel w.channel sends to the next rank and receives from the previous one in one
// collective: what the host adds to its running counters after each launch. Every loop has
// the same primitives, so one loop's count times the number of loops.
RING_HOST_DEVICE void walkMessages(const WalkShape& w, int64_t* sends, int64_t* receives) {
  const int perLoop = walkStepsPerLoop(w);
  int64_t s = 0, r = 0;
  for (int i = 0; i < perLoop; ++i) {
    const Prim p = walkStep(w, i).prim;
    s += primSends(p) ? 1 : 0;
    r += primReceives(p) ? 1 : 0;
  }
  const int64_t loops = walkLoops(w);
  *sends = s * loops;
  *receives = r * loops;
}

}  // namespace ring
