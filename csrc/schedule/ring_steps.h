// The ring schedules, one step at a time: which primitive a rank performs at step i of a
// pipeline loop, and on which chunk. Compiled for host and device: the CPU planner
// (ring_plan.cc) and the CUDA kernels both walk these functions, so the two paths cannot
// disagree about the order of sends, receives and reductions.
#pragma once

#include <cstdint>

#include "common/hostdevice.h"
#include "schedule/partition.h"

namespace ring {

enum class Prim : uint8_t {
  Send,                // input[src]                      -> next
  RecvReduceSend,      // prev (op) input[src]            -> next
  RecvReduceCopySend,  // prev (op) input[src], finalized -> output[dst] and next
  RecvReduceCopy,      // prev (op) input[src], finalized -> output[dst]
  RecvCopySend,        // prev                            -> output[dst] and next
  Recv,                // prev                            -> output[dst]
  Copy,                // input[src]                      -> output[dst]   (local, no message)
};

// One step of a rank's schedule, the one step type of the CPU plans (ring_plan.h) and the
// kernels' walk (ring_walk.h). Offsets and count are in elements. `src` indexes the input
// buffer, `dst` the output buffer (the same buffer for in-place collectives).
struct Step {
  Prim prim;
  int64_t src;
  int64_t dst;
  int64_t count;
};

RING_HOST_DEVICE bool primSends(Prim p) {
  return p == Prim::Send || p == Prim::RecvReduceSend || p == Prim::RecvReduceCopySend ||
         p == Prim::RecvCopySend;
}
RING_HOST_DEVICE bool primReceives(Prim p) { return p != Prim::Send && p != Prim::Copy; }
RING_HOST_DEVICE bool primReduces(Prim p) {
  return p == Prim::RecvReduceSend || p == Prim::RecvReduceCopySend || p == Prim::RecvReduceCopy;
}

struct StepShape {
  Prim prim;
  int chunk;  // index of the chunk (0 .. n-1) this step moves
};

// ---- all-reduce: reduce-scatter then all-gather, 2n-1 primitives per loop (n >= 2) --------
//   0            send               chunk r
//   1 .. n-2     recvReduceSend     chunk r-i
//   n-1          recvReduceCopySend chunk r+1   (the chunk completed at this rank)
//   n .. 2n-3    recvCopySend       chunk r-(i-n)
//   2n-2         recv               chunk r+2
RING_HOST_DEVICE int allReduceStepsPerLoop(int n) { return 2 * n - 1; }
RING_HOST_DEVICE StepShape allReduceStep(int n, int rank, int i) {
  StepShape s;
  if (i == 0) {
    s.prim = Prim::Send;
    s.chunk = rank;
  } else if (i <= n - 2) {
    s.prim = Prim::RecvReduceSend;
    s.chunk = modRank(rank - i, n);
  } else if (i == n - 1) {
    s.prim = Prim::RecvReduceCopySend;
    s.chunk = modRank(rank + 1, n);
  } else if (i <= 2 * n - 3) {
    s.prim = Prim::RecvCopySend;
    s.chunk = modRank(rank - (i - n), n);
  } else {
    s.prim = Prim::Recv;
    s.chunk = modRank(rank + 2, n);
  }
  return s;
}

// ---- reduce-scatter: n primitives (n-1 messages) per loop (n >= 2); block r ends at rank r -
//   0          send            block r-1
//   1 .. n-2   recvReduceSend  block r-1-i
//   n-1        recvReduceCopy  block r      (into the output)
RING_HOST_DEVICE int reduceScatterStepsPerLoop(int n) { return n; }
RING_HOST_DEVICE StepShape reduceScatterStep(int n, int rank, int i) {
  StepShape s;
  if (i == 0) {
    s.prim = Prim::Send;
    s.chunk = modRank(rank - 1, n);
  } else if (i <= n - 2) {
    s.prim = Prim::RecvReduceSend;
    s.chunk = modRank(rank - 1 - i, n);
  } else {
    s.prim = Prim::RecvReduceCopy;
    s.chunk = rank;
  }
  return s;
}

// ---- all-gather: n+1 primitives per loop (n >= 2) ------------------------------------------
//   0          copy          block r   (input -> its place in the output)
//   1          send          block r
//   2 .. n-1   recvCopySend  block r-(i-1)
//   n          recv          block r-(n-1) = r+1
RING_HOST_DEVICE int allGatherStepsPerLoop(int n) { return n + 1; }
RING_HOST_DEVICE StepShape allGatherStep(int n, int rank, int i) {
  StepShape s;
  if (i == 0) {
    s.prim = Prim::Copy;
    s.chunk = rank;
  } else if (i == 1) {
    s.prim = Prim::Send;
    s.chunk = rank;
  } else if (i <= n - 1) {
    s.prim = Prim::RecvCopySend;
    s.chunk = modRank(rank - (i - 1), n);
  } else {
    s.prim = Prim::Recv;
    s.chunk = modRank(rank + 1, n);
  }
  return s;
}

// ---- broadcast: one primitive per loop, by position in the chain from the root --------------
RING_HOST_DEVICE Prim broadcastPrim(int n, int rank, int root) {
  int position = modRank(rank - root, n);
  return position == 0 ? Prim::Send : (position == n - 1 ? Prim::Recv : Prim::RecvCopySend);
}

// ---- reduce: one primitive per loop; the chain starts after the root and ends at it ---------
RING_HOST_DEVICE Prim reducePrim(int n, int rank, int root) {
  int position = modRank(rank - root - 1, n);
  return position == 0 ? Prim::Send
                       : (position == n - 1 ? Prim::RecvReduceCopy : Prim::RecvReduceSend);
}

}  // namespace ring
