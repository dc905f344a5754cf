#include "common/cpu_binding.h"

#include <sched.h>

#include <cerrno>
#include <cstring>

#include "common/errors.h"
#include "common/numa_topology.h"

namespace ring {


std::vector<int> threadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::vector<int> CpuBinder::usable() {
  std::lock_guard<std::mutex> lock(mutex_);
  return bound_ ? before_ : threadCpus();
}

std::string CpuBinder::alreadyBoundLocked(const char* mode) const {
  return strCat("TORCH_RING_CPU_BIND=", mode, ": this process is already bound to CPU",
                cpus_.size() == 1 ? " " : "s ", cpuListText(cpus_), " (by its first group)");
}

int CpuBinder::bindLocked(const std::vector<int>& cpus, const std::vector<int>& before) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) return errno;
  bound_ = true;
  cpus_ = cpus;
  before_ = before;
  return 0;
}

std::string CpuBinder::bindOnce(int localIndex, int localRanks, bool* bound) {
  std::lock_guard<std::mutex> lock(mutex_);
  *bound = bound_;
  if (bound_) return alreadyBoundLocked("core");
  const std::vector<int> cpus = threadCpus();
  RING_ASSERT(localIndex >= 0 && localIndex < localRanks, "local index ", localIndex, " of ",
              localRanks);
  if (cpus.empty() || static_cast<int>(cpus.size()) < localRanks) {
    return strCat("TORCH_RING_CPU_BIND=core: the ", localRanks, " ranks of this host share ",
                  cpus.size(), " CPU(s) (", cpuListText(cpus), "); not bound");
  }
  const int cpu = cpus[static_cast<size_t>(localIndex)];
  if (const int e = bindLocked({cpu}, cpus); e != 0) {
    return strCat("TORCH_RING_CPU_BIND=core: binding to CPU ", cpu, " failed (",
                  std::strerror(e), "); not bound");
  }
  *bound = true;
  return strCat("TORCH_RING_CPU_BIND=core: bound this thread to CPU ", cpu, " (local rank ",
                localIndex, " of ", localRanks, " on CPUs ", cpuListText(cpus), ")");
}

std::string CpuBinder::bindToNodeOnce(const std::vector<NumaNode>& nodes, int localIndex,
                                      int localRanks, bool* bound) {
  std::lock_guard<std::mutex> lock(mutex_);
  *bound = bound_;
  if (bound_) return alreadyBoundLocked("numa");
  const std::vector<int> usable = threadCpus();
  const NodePlace place = nodeForLocalRank(nodes, usable, localIndex, localRanks);
  if (place.nodesReached <= 1) {
    return strCat("TORCH_RING_CPU_BIND=numa: the CPUs this process may use (",
                  cpuListText(usable), ") are on ", place.nodesReached,
                  " NUMA node(s): nothing to bind");
  }
  if (const int e = bindLocked(place.cpus, usable); e != 0) {
    return strCat("TORCH_RING_CPU_BIND=numa: binding to node ", place.node, "'s CPUs ",
                  cpuListText(place.cpus), " failed (", std::strerror(e), "); not bound");
  }
  *bound = true;
  node_ = place.node;
  return strCat("TORCH_RING_CPU_BIND=numa: bound this thread to NUMA node ", place.node,
                " (CPUs ", cpuListText(place.cpus), "; local rank ", localIndex, " of ",
                localRanks, " over ", place.nodesReached, " nodes, in blocks)");
}

int CpuBinder::boundNode() {
  std::lock_guard<std::mutex> lock(mutex_);
  return node_;
}

CpuBinder& processCpuBinder() {
  static CpuBinder binder;
  return binder;
}

}  // namespace ring
