#include "common/cpu_binding.h"

#include <sched.h>

#include <cerrno>
#include <cstring>

#include "common/errors.h"

namespace ring {

namespace {

// "0-3,6" from a sorted list.
std::string describeCpus(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

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

std::string CpuBinder::bindOnce(int localIndex, int localRanks, bool* bound) {
  std::lock_guard<std::mutex> lock(mutex_);
  *bound = bound_;
  if (bound_) {
    return strCat("TORCH_RING_CPU_BIND=core: this process is already bound to CPU ", cpu_,
                  " (by its first group)");
  }
  const std::vector<int> cpus = threadCpus();
  RING_ASSERT(localIndex >= 0 && localIndex < localRanks, "local index ", localIndex, " of ",
              localRanks);
  if (cpus.empty() || static_cast<int>(cpus.size()) < localRanks) {
    return strCat("TORCH_RING_CPU_BIND=core: the ", localRanks, " ranks of this host share ",
                  cpus.size(), " CPU(s) (", describeCpus(cpus), "); not bound");
  }
  const int cpu = cpus[static_cast<size_t>(localIndex)];
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) {
    return strCat("TORCH_RING_CPU_BIND=core: binding to CPU ", cpu, " failed (",
                  std::strerror(errno), "); not bound");
  }
  bound_ = true;
  *bound = true;
  cpu_ = cpu;
  before_ = cpus;
  return strCat("TORCH_RING_CPU_BIND=core: bound this thread to CPU ", cpu, " (local rank ",
                localIndex, " of ", localRanks, " on CPUs ", describeCpus(cpus), ")");
}

CpuBinder& processCpuBinder() {
  static CpuBinder binder;
  return binder;
}

}  // namespace ring
