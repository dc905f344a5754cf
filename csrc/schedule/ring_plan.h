// Ring schedules as data: the list of primitive steps one rank performs for a collective.
//
// A plan is a pure function of (collective, nranks, rank, sizes, slice size). The CPU executor
// interprets it over links to the ring neighbours; the CUDA kernels walk the same sequence with
// the same partition arithmetic. Tests run every rank's plan in a single-threaded simulator.
//
// Data always flows rank r -> rank r+1 (ringNext). Every step that sends puts exactly one
// message on the link to the next rank; every step that receives takes exactly one message
// from the previous rank. Within one pipeline loop a rank alternates send/receive, so a FIFO
// of two or more slots per link can never deadlock (see docs/algorithms.md).
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/partition.h"
#include "schedule/ring_steps.h"

namespace ring {

const char* primName(Prim p);


// All-reduce in place on `count` elements: ring reduce-scatter then ring all-gather,
// 2(n-1) messages per loop; chunk k is chunkRange(count, n, k).
std::vector<Step> planAllReduce(int nranks, int rank, int64_t count, int64_t sliceElems);

// The two halves of planAllReduce as plans of their own, for a collective that does something
// else between them (the two-level all_reduce, executor/hier_all_reduce.h). The reduce half
// ends with chunk (rank + 1) mod n reduced (without AVG's division) at rank; the gather half
// starts from there and ends with every chunk everywhere. In place, like planAllReduce, and
// the same order of additions: the halves run back to back give planAllReduce's bits.
std::vector<Step> planAllReduceReduceHalf(int nranks, int rank, int64_t count,
                                          int64_t sliceElems);
std::vector<Step> planAllReduceGatherHalf(int nranks, int rank, int64_t count,
                                          int64_t sliceElems);

// Reduce-scatter: input holds nranks * countPerRank elements, output countPerRank; rank r ends
// with the reduction of every rank's block r. n-1 messages per loop.
std::vector<Step> planReduceScatter(int nranks, int rank, int64_t countPerRank,
                                    int64_t sliceElems);

// All-gather: input holds countPerRank elements, output nranks * countPerRank; block r of the
// output is rank r's input. n-1 messages per loop.
std::vector<Step> planAllGather(int nranks, int rank, int64_t countPerRank, int64_t sliceElems);

// Broadcast in place from `root`: a pipelined chain root -> root+1 -> ... -> root-1.
std::vector<Step> planBroadcast(int nranks, int rank, int root, int64_t count,
                                int64_t sliceElems);

// Reduce to `root`: a pipelined chain root+1 -> root+2 -> ... -> root, each hop reducing.
// Non-root ranks leave their output untouched.
std::vector<Step> planReduce(int nranks, int rank, int root, int64_t count, int64_t sliceElems);

}  // namespace ring
