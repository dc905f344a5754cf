// What the tests of the CUDA path over the emulated runtime share: the cases (every
// collective, dtype and op the ring kernels cover, each with a size, offset and form), one
// rank's run of cases through CudaRingLinks + ring_launcher on a stream of its own, compared
// bit for bit with the CPU executor given the same inputs, and rank processes forked with a
// shared-memory store, their results and their stderr collected.
#pragma once

#include <cuda_runtime.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/types.h"
#include "kernel_case_space.h"
#include "kernels/ring_launcher.h"
#include "shared_memory_store.h"
#include "transport/cuda_ipc/cuda_ring_links.h"
#include "transport/store.h"

namespace ring {

class Communicator;

namespace testing_support {

struct EmulatedCase {
  Collective kind;
  DType dtype;
  RedOp op;
  int64_t count;
  int root;      // broadcast
  bool inPlace;  // all_gather: the input is block `rank` of the output
  int offset;    // elements past the allocation's start where every buffer begins
};
std::string describeCase(const EmulatedCase& c);

// Every (collective, dtype, op) the kernels cover, numbered; the ones numbered `part` modulo
// `parts` are returned, each given a count, root, form and offset for a group of `world`.
std::vector<EmulatedCase> casesFor(int world, int part, int parts);
// How many (collective, dtype, op) combinations there are.
int combinationCount();

// geometryFor(channels): kernel_case_space.h.
CudaLinkOptions linkOptions(int device, const FifoGeometry& g);

// Waits (polling) until `stream` has finished, at most `limit`; past it, raises this rank's
// abort word, waits for the stream, and returns false.
bool finishOrAbort(CudaRingLinks& links, cudaStream_t stream, std::chrono::milliseconds limit);

// One rank: makes `device` current, sets up CudaRingLinks and a Communicator through `store`,
// runs every case through the kernels (device buffers, its own non-blocking stream) and
// through the CPU executor, then closes the links collectively. Returns what went wrong
// (empty: every result matched bit for bit and no kernel stopped early). *linkDescription:
// CudaRingLinks::describe(). `startDelay`: how long the rank waits between setting up its links
// and its first launch (a rank that comes late).
std::vector<std::string> runRankCases(Store& store, int rank, int world, int device,
                                      const FifoGeometry& g,
                                      const std::vector<EmulatedCase>& cases,
                                      std::string* linkDescription = nullptr,
                                      std::chrono::milliseconds startDelay = {});

// runRankCases with ranks as threads of this process (rank r on device r if gpuPerRank, else
// all on device 0) sharing one in-memory store. Returns every problem as "rank r: ..." (a rank
// that threw, or a case that did not match), empty if none; *descriptions: each rank's
// CudaRingLinks::describe().
std::vector<std::string> runThreadRankCases(int world, const FifoGeometry& g,
                                            const std::vector<EmulatedCase>& cases,
                                            bool gpuPerRank = false,
                                            std::vector<std::string>* descriptions = nullptr);

// One collective of one case on one rank through the kernels: "" or what went wrong; the
// output bytes in *out.
std::string launchCase(const EmulatedCase& c, uint64_t seq, int rank, int world,
                       CudaRingLinks& links, ChannelCounters* counters, cudaStream_t stream,
                       const std::vector<char>& input, std::vector<char>* out);

// Rank i's input for case number `id` (full-width integers, floats with many mantissa bits).
std::vector<char> inputFor(const EmulatedCase& c, int world, uint64_t id, int rank);

// ---- rank processes -----------------------------------------------------------------------------

struct ProcessOutcome {
  int exitCode = -1;   // 128 + signal when a signal ended it
  std::string result;  // what the rank's body returned ("" = fine), or why it has none
  std::string log;     // its stderr
};

// Forks `world` rank processes; each runs body(rank) (its return value is the rank's result)
// and exits. `parent`, if given, runs meanwhile in the test process with the ranks' pids.
// Ranks still running after `limit` are killed.
std::vector<ProcessOutcome> runRankProcesses(
    int world, SharedMemoryStore& store, const std::function<std::string(int rank)>& body,
    std::chrono::seconds limit,
    const std::function<void(const std::vector<pid_t>&)>& parent = nullptr);

// "rank 1: exit 0, result 'x'" lines, for a failure message.
std::string describeOutcomes(const std::vector<ProcessOutcome>& outcomes);

}  // namespace testing_support
}  // namespace ring
