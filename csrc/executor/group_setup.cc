// What a group decides once, at set-up, beside its links: how long its waits spin, which CPU
// each rank runs on (TORCH_RING_CPU_BIND), and that every rank plans its calls alike.
#include "executor/group_setup.h"

#include <algorithm>

#include "common/cache_topology.h"
#include "common/cpu_binding.h"
#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "transport/store.h"

namespace ring {
namespace {

// Why adaptive: a waiter that spins answers within a microsecond when its peer runs on another
// core, several times sooner than through futex wake-ups, but when ranks outnumber cores a long
// spin takes the core from the very rank it waits for, and calls ran several times slower
// (measured: docs/notes/code_comment_figures.md, "Spin lengths"). So a long spin only when this
// host's ranks of the group fit on the cores this process may use, and a short one otherwise.
// The spin where every rank of the host has a core of its own (see below).
constexpr int kOwnCoreSpinMicros = 500;

int spinMicrosFor(int localRanks, bool onlySharedMemory) {
  if (env().spinMicros >= 0) return env().spinMicros;
  const int cores = usableCores();
  // 500 us covers a peer's turnaround, including its caller-to-worker thread hand-off, with
  // room to spare (a tenth of it often expired just before the peer arrived, which then paid
  // the futex round trip on top), and still bounds what a wait can waste when the peer has
  // been descheduled after all.
  if (localRanks <= cores) return kOwnCoreSpinMicros;
  // More ranks than cores. A waiter spins with a yield every 64 pauses (wait.cc), so the rank
  // it waits for runs as soon as it is runnable; sleeping at once instead costs a futex wake
  // and a context switch per message: with 4 ranks on 2 cores a short spin made small and
  // middle-sized calls faster and large ones no slower. Over TCP the I/O threads must run to
  // move the data, and spinning ranks took their CPU, so none there (measured: the figures in
  // docs/notes/code_comment_figures.md, "Spin lengths").
  return onlySharedMemory ? 50 : 0;
}

}  // namespace

int usableCores() { return std::max<int>(1, static_cast<int>(processCpuBinder().usable().size())); }

SpinChoice chooseSpin(int localRanks, bool onlySharedMemory) {
  SpinChoice c;
  c.micros = spinMicrosFor(localRanks, onlySharedMemory);
  c.ownCore = c.micros >= kOwnCoreSpinMicros;
  RING_LOG(kLogInfo, "a wait spins up to ", c.micros, " us before it sleeps (", localRanks,
           " rank(s) of this machine, ", usableCores(), " CPU(s)",
           env().spinMicros >= 0 ? "; TORCH_RING_SPIN_US" : "", ")");
  return c;
}

void bindToCore(int machineIndex, int localRanks) {
  // This rank's place among its machine's ranks of the group picks its CPU.
  bool bound = false;
  const std::string what = processCpuBinder().bindOnce(machineIndex, localRanks, &bound);
  RING_LOG(bound ? kLogInfo : kLogWarn, what);
}

std::optional<std::vector<NumaNode>> numaNodesBeside(const std::string& cpuDir) {
  std::string dir = cpuDir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return numaNodes((slash == std::string::npos ? std::string(".") : dir.substr(0, slash)) +
                   "/node");
}

int nodeForRank(const std::optional<std::vector<NumaNode>>& nodes, int machineIndex,
                int machineRanks) {
  if (!nodes) return -1;
  // A process bound by its first group keeps that node for every later group's inbox.
  if (const int bound = processCpuBinder().boundNode(); bound >= 0) return bound;
  // The CPUs the process had before any binding of its own: every group of the process sees
  // the same nodes, so its inbox and its thread agree.
  const NodePlace place =
      nodeForLocalRank(*nodes, processCpuBinder().usable(), machineIndex, machineRanks);
  return place.nodesReached >= 2 ? place.node : -1;
}

void bindToNode(const std::optional<std::vector<NumaNode>>& nodes, int machineIndex,
                int machineRanks) {
  if (!nodes) {
    RING_LOG(kLogWarn, "TORCH_RING_CPU_BIND=numa: no NUMA tree could be read (beside ",
             env().cpuSysfs, "): not bound");
    return;
  }
  if (nodeForRank(nodes, machineIndex, machineRanks) < 0) {
    RING_LOG(kLogInfo, "TORCH_RING_CPU_BIND=numa: the CPUs this process may use are on one "
             "NUMA node: nothing to bind, nothing to place");
    return;
  }
  bool bound = false;
  const std::string what =
      processCpuBinder().bindToNodeOnce(*nodes, machineIndex, machineRanks, &bound);
  RING_LOG(bound ? kLogInfo : kLogWarn, what);
}

// Why from the machine and not only from the trials: a class's trials start at its 64th call,
// and until then its copies follow the start. Where the cores share a last-level cache, a
// streamed copy sends every line to memory and the peer fetches it back from there (slower than
// cached for those first calls on a Xeon whose two cores share an L3, issue 67); where they do
// not, a cached copy pulls each line from the peer's cache first (both:
// docs/notes/code_comment_figures.md, "Streaming stores"). A start that fits the machine makes
// the trials a check instead of a detour.
bool chooseCopyStart(Store& store, int rank, int size, const std::vector<int>& shmDomainOf,
                     const std::string& cpuDir, const std::vector<int>& cpus,
                     std::chrono::milliseconds timeout) {
  const std::string mine = cacheLine(lastLevelCachesOf(cpuDir, cpus));
  store.set(strCat("ring/llc/", rank), mine);
  const std::vector<std::string> lines = readEveryRank(
      store, rank, size, [](int r) { return strCat("ring/llc/", r); }, mine, timeout);
  std::vector<std::string> host;
  std::string seen;
  for (int r = 0; r < size; ++r) {
    if (shmDomainOf[static_cast<size_t>(r)] != shmDomainOf[static_cast<size_t>(rank)]) continue;
    host.push_back(lines[static_cast<size_t>(r)]);
    seen += strCat(seen.empty() ? "" : ", ", "rank ", r, ": ", lines[static_cast<size_t>(r)]);
  }
  if (host.size() < 2) return true;  // no peer shares memory with this rank: nothing to copy
  const bool shared = shareOneLastLevelCache(host);
  RING_LOG(kLogInfo, "copies into shared memory start ", shared ? "cached" : "streamed",
           shared ? " (this host's ranks share one last-level cache: "
                  : " (this host's ranks do not all run under one last-level cache: ",
           seen, "; from ", cpuDir, "); timed trials from a size's 64th call confirm or "
           "correct it");
  return !shared;
}

// Every rank publishes its plan settings and compares everyone's with its own, so that ranks
// configured differently fail at set-up, each naming a rank that differs, instead of running
// different plans (whose messages would go to different peers: a timeout, not a clear error).
void agreeOnPlans(Store& store, int rank, int size, const std::string& mine,
                  std::chrono::milliseconds timeout) {
  store.set(strCat("ring/plans/", rank), mine);
  const std::vector<std::string> lines = readEveryRank(
      store, rank, size, [](int r) { return strCat("ring/plans/", r); }, mine, timeout);
  for (int r = 0; r < size; ++r) {
    const std::string& theirs = lines[static_cast<size_t>(r)];
    RING_USAGE_CHECK(theirs == mine, "ring: rank ", rank, " has collective plans '", mine,
                     "' but rank ", r, " has '", theirs,
                     "': every rank must set TORCH_RING_ALGO and TORCH_RING_RD_BYTES alike (and, "
                     "in a group of several hosts, TORCH_RING_DIRECT_BYTES, TORCH_RING_SHM_LINK "
                     "and TORCH_RING_NET_LINK)");
  }
}

}  // namespace ring
