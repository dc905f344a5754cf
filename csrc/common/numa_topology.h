// The machine's NUMA nodes, read from the kernel's sysfs tree (/sys/devices/system/node/
// nodeN/cpulist), and which node each of a host's ranks takes.
//
// Why: on a machine of several sockets (or of several nodes per socket) a core reads memory of
// its own node at full speed and another node's through the link between them, at a fraction
// of it. A rank bound to one node (TORCH_RING_CPU_BIND=numa) and reading inboxes placed on that
// node (transport/shm) keeps its reads local; the copies that must cross do so once, by the
// sender. On a machine of one node all of this changes nothing.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ring {

struct NumaNode {
  int id = -1;
  std::vector<int> cpus;  // increasing
};

// The kernel's CPU list syntax ("0-3,8-11", "5", ""): the CPUs in increasing order; nullopt on
// anything else.
std::optional<std::vector<int>> parseCpuList(const std::string& text);

// The nodes under `nodeDir` (/sys/devices/system/node on a real machine: the sibling "node" of
// TORCH_RING_CPU_SYSFS's tree), by id, each with its CPUs; nodes without CPUs (memory only) are
// left out. nullopt when the tree cannot be read (a kernel without NUMA, no /sys).
std::optional<std::vector<NumaNode>> numaNodes(const std::string& nodeDir);

// Where local rank `localIndex` of a host's `localRanks` runs: the nodes that the CPUs the
// process may use (`usable`) reach, in id order, dealt out in blocks, so that ranks next to each
// other on the ring share a node and the ring crosses between nodes as few times as it can
// (4 ranks on 2 nodes: 0 0 1 1, where round robin would cross on every hop). `cpus` is that
// node's CPUs among `usable`.
struct NodePlace {
  int node = -1;          // -1: nothing to choose (no node reached, or a rank index out of range)
  int nodesReached = 0;   // how many nodes `usable` reaches
  std::vector<int> cpus;
};
NodePlace nodeForLocalRank(const std::vector<NumaNode>& nodes, const std::vector<int>& usable,
                           int localIndex, int localRanks);

// "0-3,6" from increasing CPUs (the kernel's syntax back).
std::string cpuListText(const std::vector<int>& cpus);

}  // namespace ring
