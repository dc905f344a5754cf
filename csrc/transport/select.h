// Which transport serves each link of a group, and the group's Transport built from them.
//
// Every rank publishes its host identity and reads everyone's, so every rank makes the same
// choice for every link. Each transport answers for a link whether it can serve it, and
// declines otherwise (ARCHITECTURE: transports that decline rather than fail); the first in
// order of preference that accepts takes the link:
//   shared memory - the two ranks share a host and its namespaces (and the mode is not tcp);
//   TCP           - any two ranks (unless the mode is shm).
// The links of one rank may mix both: a MixedTransport then routes each peer to its own.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/link.h"
#include "transport/shm/shm_layout.h"
#include "transport/store.h"

namespace ring {

struct TransportOptions {
  std::string mode;           // "auto", "shm" or "tcp"
  std::string hostId;         // this rank's host identity
  std::string groupName;
  std::string listenAddress;  // for TCP; empty: TORCH_RING_SOCKET_IFNAME / MASTER_ADDR
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  // set-up
  bool slotBytesChosen = false;  // the slot size was set: keep it even if every link is TCP
  bool slotsChosen = false;      // the depth was set: the fit keeps both as they are
  int64_t shmBudget = 0;         // TORCH_RING_SHM_BUDGET in bytes; 0: auto
  // The NUMA node this rank's shared-memory inbox should be allocated on, given its place
  // among its machine's ranks (LinkChoice's machineIndex of machineRanks); -1 or unset: where
  // the kernel puts it. Set by the executor where ranks are bound to nodes.
  std::function<int(int machineIndex, int machineRanks)> inboxNode;
};

// The pure part of the choice, from every rank's host identity (hosts[r] is rank r's).
struct LinkChoice {
  std::vector<int> shmRanks;  // this rank and the peers reached over shared memory
  std::vector<int> tcpRanks;  // the peers reached over TCP
  std::vector<char> viaShm;   // per rank: 1 if over shared memory
  int machineRanks = 1;       // ranks on this machine, any transport and namespace (this one too)
  int machineIndex = 0;       // of those, how many have a lower rank: this rank's place among them
  bool allTcp = false;        // no link of the GROUP is shared memory (the same on every rank)
  // Per rank of the group: the lowest rank it shares memory with (itself included), the same
  // list on every rank: the "hosts" of the plans (schedule/host_layout.h). With mode tcp every
  // rank is a host of its own.
  std::vector<int> shmDomainOf;
};
// Throws UsageError for an unknown mode, CommError for shm across hosts.
LinkChoice chooseLinks(const std::string& mode, int rank, const std::vector<std::string>& hosts);

// Where the group's ranks are, as the transports found them (LinkChoice's fields of the same
// names).
struct GroupPlacement {
  int machineRanks = 1;
  int machineIndex = 0;
  std::vector<int> shmDomainOf;
};

// Collective: publishes this rank's identity (and what it found of /dev/shm), reads
// everyone's, connects every link. geometry->slotBytes grows to the TCP default when every
// link of the group is TCP (unless chosen); slots and slotBytes shrink where a host's
// inboxes would not fit its budget (transport/shm/shm_footprint.h), the same on every rank.
std::unique_ptr<Transport> connectGroup(Store& store, int rank, int size,
                                        const TransportOptions& opts, ShmGeometry* geometry,
                                        GroupPlacement* placement);

}  // namespace ring
