// What a group decides once, at set-up, beside its links (Communicator's constructor): how long
// a wait spins before it sleeps, which CPU each rank runs on, and that every rank plans its
// calls alike.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/numa_topology.h"

#include "transport/store.h"

namespace ring {

// The spin a wait takes (WaitContext::spinMicros), and whether every rank of this host has a
// core of its own (then a wait never yields while it spins: WaitContext::yieldWhileSpinning).
struct SpinChoice {
  int micros = 0;
  bool ownCore = false;
};
// For `localRanks` ranks of the group on this machine, over shared memory only or not
// (TORCH_RING_SPIN_US overrides it); logged.
SpinChoice chooseSpin(int localRanks, bool onlySharedMemory);

// The CPUs this process's ranks of a machine share: those it had before TORCH_RING_CPU_BIND
// bound its thread to one of them (a later group, made on that thread, still counts them all).
int usableCores();

// TORCH_RING_CPU_BIND=core: binds the calling thread to the CPU of the rank at `machineIndex`
// among this machine's `localRanks`; logged (a warning where it could not).
void bindToCore(int machineIndex, int localRanks);

// TORCH_RING_CPU_BIND=numa. The NUMA tree beside the CPU tree `cpuDir` (/sys/devices/system/
// cpu -> /sys/devices/system/node), nullopt where it cannot be read.
std::optional<std::vector<NumaNode>> numaNodesBeside(const std::string& cpuDir);
// The node local rank machineIndex of machineRanks takes (numa_topology.h), where the CPUs this
// process may use reach two nodes or more; else -1. What the inbox is placed on, and what
// bindToNode binds to.
int nodeForRank(const std::optional<std::vector<NumaNode>>& nodes, int machineIndex,
                int machineRanks);
// Binds the calling thread to that node's CPUs, once per process, and logs what it did.
void bindToNode(const std::optional<std::vector<NumaNode>>& nodes, int machineIndex,
                int machineRanks);

// Whether this rank's copies into shared memory start streamed (CopyChoice::startWith): every
// rank publishes the last-level caches its CPUs `cpus` use (common/cache_topology.h, read
// under `cpuDir`: TORCH_RING_CPU_SYSFS) and reads the others'; the ranks that share memory with this one
// (shmDomainOf: the same domain) start cached when they all run under one and the same cache,
// streamed otherwise, and when nothing could be read. Logged with the caches it saw.
bool chooseCopyStart(Store& store, int rank, int size, const std::vector<int>& shmDomainOf,
                     const std::string& cpuDir, const std::vector<int>& cpus,
                     std::chrono::milliseconds timeout);

// Every rank publishes its plan settings line and compares everyone's with its own: ranks
// configured differently fail at set-up, each naming a rank that differs.
void agreeOnPlans(Store& store, int rank, int size, const std::string& mine,
                  std::chrono::milliseconds timeout);

}  // namespace ring
