// torch's monitored_barrier (dist.monitored_barrier), with gloo's documented semantics: every
// rank but 0 tells rank 0 it has arrived and waits for rank 0's release; rank 0 waits for each
// rank in turn, within one timeout for them all, and raises naming the first rank that did not
// come (wait_all_ranks: every such rank); the others then raise at their own timeout, saying
// that rank 0 did not release them.
//
// Why over the group's store and not its links: the barrier is what a user reaches for when
// collectives hang, so it must not queue behind a stuck collective nor need links in step; the
// store answers as long as its server does. Beyond gloo, rank 0's error says what each missing
// rank was last doing as far as this rank can tell (`describeRank`).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace ring {

struct MonitoredBarrierCall {
  int rank;
  int size;
  std::string group;
  uint64_t call;  // the group's count of monitored barriers before this one (same on every rank)
  std::chrono::milliseconds timeout;
  bool waitAllRanks;
};

// Throws DistBackendError as described above; returns once rank 0 has released every rank.
void runMonitoredBarrier(c10d::Store& store, const MonitoredBarrierCall& c,
                         const std::function<std::string(int rank)>& describeRank);

}  // namespace ring
