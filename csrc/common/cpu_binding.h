// Binding a rank's calling thread to a CPU of its own (TORCH_RING_CPU_BIND=core), as mpirun
// binds its ranks to cores by default, or to the CPUs of a NUMA node (=numa, numa_topology.h).
//
// Why: a small collective runs on the thread that calls it, and each rank waits for the others
// by spinning (the long spin where every rank of the host has a core). Left to itself, the
// kernel sometimes puts two ranks of a host on one CPU right after they start and leaves them
// there for milliseconds while the other CPU is free: in a few jobs of many, the first calls of
// a 2-core run were several times slower than the steady ones, both ranks on one CPU for every
// call (docs/notes/latency_cold_phase.md). A rank bound to its own CPU cannot be put
// there. Opt-in: a binding also holds the user's thread and every thread it starts afterwards.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "common/numa_topology.h"

namespace ring {

// The CPUs the calling thread may run on (sched_getaffinity), in increasing order.
std::vector<int> threadCpus();

class CpuBinder {
 public:
  // The CPUs this process had to itself for its ranks: the calling thread's CPUs, or, once
  // this binder has bound a thread, the CPUs that thread had before (so that a later group,
  // created on the bound thread, still sees every rank of the host with a core of its own).
  std::vector<int> usable();
  // Binds the calling thread to the localIndex-th of its CPUs, where the host's localRanks
  // ranks of the group each have one (localRanks <= CPUs); once per binder: a second call
  // changes nothing. Returns what it did, for the log; *bound says whether a thread is bound.
  std::string bindOnce(int localIndex, int localRanks, bool* bound);
  // TORCH_RING_CPU_BIND=numa: binds the calling thread to the CPUs of the NUMA node that local
  // rank localIndex of localRanks takes (numa_topology.h: nodeForLocalRank), once per binder,
  // where the process's CPUs reach two nodes or more; on one node it binds nothing.
  std::string bindToNodeOnce(const std::vector<NumaNode>& nodes, int localIndex,
                             int localRanks, bool* bound);
  // The node a numa binding chose, else -1.
  int boundNode();

 private:
  // With mutex_ held: the words for a second binding of the process, and the binding of the
  // calling thread to `cpus` (recorded with the CPUs it had, `before`); errno, or 0.
  std::string alreadyBoundLocked(const char* mode) const;
  int bindLocked(const std::vector<int>& cpus, const std::vector<int>& before);

  std::mutex mutex_;
  bool bound_ = false;
  int node_ = -1;
  std::vector<int> cpus_;   // what the bound thread may run on
  std::vector<int> before_;  // the bound thread's CPUs before it was bound
};

// The process's binder: every group of the process asks it.
CpuBinder& processCpuBinder();

}  // namespace ring
