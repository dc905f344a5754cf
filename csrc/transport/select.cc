#include "transport/select.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>

#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "transport/host_identity.h"
#include "transport/mixed_transport.h"
#include "transport/shm/shm_footprint.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace ring {
namespace {

// Default slot size when every link of the group is TCP. Each frame costs a few system calls
// and thread wake-ups whatever its size, and TCP copies through socket buffers anyway, so the
// L2-sized shared-memory default buys nothing here, and 1 MiB slots moved more (docs/multihost.md).
constexpr int64_t kTcpSlotBytes = 1024 * 1024;

// True when no link of the group is shared memory. Decided from every rank's host identity
// (the same list on every rank), so that all ranks pick the same slot size: the TCP handshake
// and the shared-memory header both refuse a peer whose slots differ.
bool allTcp(const std::string& mode, const std::vector<std::string>& hosts) {
  // One rank has no links: keep the shared-memory default for it.
  if (hosts.size() < 2 || mode == "shm") return false;
  if (mode == "tcp") return true;
  std::vector<std::string> sorted = hosts;
  std::sort(sorted.begin(), sorted.end());
  return std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
}

// What a rank publishes beside its host identity: the free space of /dev/shm it found before
// any inbox of this group was made, and the budget it asks for.
std::string roomText(int64_t budget) { return strCat(shmFreeBytes(), " ", budget); }

ShmRoom parseRoom(const std::string& text) {
  ShmRoom room;
  long long free = -1, budget = 0;
  if (std::sscanf(text.c_str(), "%lld %lld", &free, &budget) != 2) {
    throw CommError(strCat("ring: a peer's set-up key holds '", text, "' where the free space "
                           "of /dev/shm and a budget belong: ranks of different versions?"));
  }
  // Unreadable free space: only the budget limits.
  room.freeBytes = free < 0 ? std::numeric_limits<int64_t>::max() : free;
  room.budget = budget;
  return room;
}

// The geometry every shared-memory link of the group gets: per host, the fit of that host's
// ranks to the least free space and budget its ranks reported; across hosts, the smallest of
// those, so that every link of the group has one slot size (the plans slice by it) and every
// rank computes the same from the same keys. A host's lowest rank logs its host's fit.
void fitSharedMemory(const TransportOptions& opts, const LinkChoice& c, int rank,
                     const std::vector<ShmRoom>& rooms, ShmGeometry* geometry) {
  std::map<int, std::vector<int>> domains;  // lowest rank -> its shared-memory domain
  for (size_t r = 0; r < c.shmDomainOf.size(); ++r) {
    domains[c.shmDomainOf[r]].push_back(static_cast<int>(r));
  }
  // A slot size or depth that was set is the user's sizing: neither shrinks then.
  const bool chosen = opts.slotBytesChosen || opts.slotsChosen;
  ShmGeometry smallest = *geometry;
  for (const auto& [lowest, members] : domains) {
    if (members.size() < 2) continue;
    ShmRoom room = rooms[static_cast<size_t>(members[0])];
    for (int r : members) {
      const ShmRoom& theirs = rooms[static_cast<size_t>(r)];
      room.freeBytes = std::min(room.freeBytes, theirs.freeBytes);
      if (theirs.budget > 0 && (room.budget == 0 || theirs.budget < room.budget)) {
        room.budget = theirs.budget;
      }
    }
    ShmGeometry wanted = *geometry;
    wanted.nranks = static_cast<int>(members.size());
    // Mailbox rounds need every rank of the group in one domain (as ShmTransport is made).
    if (members.size() != c.shmDomainOf.size()) wanted.mailboxBytes = 0;
    ShmFit fit;
    try {
      fit = fitShmGeometry(wanted, room, chosen);
    } catch (const CommError& e) {
      throw CommError(strCat("ring: rank ", rank, " cannot set up its group: ", e.what()));
    }
    if (fit.shrunk && lowest == rank) {
      RING_LOG(kLogWarn, describeShmFit(wanted, fit, room));
    }
    smallest.slots = std::min(smallest.slots, fit.geometry.slots);
    smallest.slotBytes = std::min(smallest.slotBytes, fit.geometry.slotBytes);
  }
  geometry->slots = smallest.slots;
  geometry->slotBytes = smallest.slotBytes;
}

void checkMode(const std::string& mode) {
  RING_USAGE_CHECK(mode == "auto" || mode == "shm" || mode == "tcp", "ring: transport '", mode,
                   "' must be auto, shm or tcp");
}

}  // namespace

LinkChoice chooseLinks(const std::string& mode, int rank, const std::vector<std::string>& hosts) {
  checkMode(mode);
  const int size = static_cast<int>(hosts.size());
  const std::string& mine = hosts[static_cast<size_t>(rank)];
  LinkChoice c;
  c.shmRanks.push_back(rank);
  c.viaShm.assign(static_cast<size_t>(size), 0);
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    const std::string& theirs = hosts[static_cast<size_t>(r)];
    if (machineOf(theirs) == machineOf(mine)) {
      ++c.machineRanks;
      if (r < rank) ++c.machineIndex;
    }
    // In order of preference: the first transport that serves the link takes it.
    if (ShmTransport::serves(mode, mine, theirs)) {
      c.shmRanks.push_back(r);
      c.viaShm[static_cast<size_t>(r)] = 1;
    } else if (TcpTransport::serves(mode)) {
      c.tcpRanks.push_back(r);
    } else {
      throw CommError(strCat(
          "ring: rank ", rank, " and rank ", r, " are on different hosts (or namespaces): '",
          mine, "' vs '", theirs, "', but TORCH_RING_TRANSPORT=shm allows shared memory only. "
          "Unset it (auto: TCP between hosts) or set it to tcp."));
    }
  }
  c.allTcp = allTcp(mode, hosts);
  // Shared memory joins ranks with equal host ids (ShmTransport::serves), so a rank's domain is
  // the lowest rank with its id: one pass with a map, not a scan per rank (1024 ranks at set-up).
  c.shmDomainOf.resize(static_cast<size_t>(size));
  std::unordered_map<std::string, int> lowestWithId;
  for (int r = 0; r < size; ++r) {
    const bool alone = !ShmTransport::serves(mode, hosts[static_cast<size_t>(r)],
                                             hosts[static_cast<size_t>(r)]);
    c.shmDomainOf[static_cast<size_t>(r)] =
        alone ? r : lowestWithId.emplace(hosts[static_cast<size_t>(r)], r).first->second;
  }
  return c;
}

// Construction order is the same on every rank (shared memory among this host's ranks, then
// TCP), so the two set-up phases never wait on each other.
std::unique_ptr<Transport> connectGroup(Store& store, int rank, int size,
                                        const TransportOptions& opts, ShmGeometry* geometry,
                                        GroupPlacement* placement) {
  checkMode(opts.mode);  // before any store traffic: a bad setting fails this rank at once
  // One key per rank: the host identity, a newline, what the rank found of /dev/shm.
  const std::string mine = strCat(opts.hostId, "\n", roomText(opts.shmBudget));
  store.set(strCat("ring/host/", rank), mine);
  const std::vector<std::string> values = readEveryRank(
      store, rank, size, [](int r) { return strCat("ring/host/", r); }, mine, opts.timeout);
  std::vector<std::string> hosts;
  std::vector<ShmRoom> rooms;
  for (const std::string& v : values) {
    const size_t newline = v.rfind('\n');
    hosts.push_back(v.substr(0, newline));
    rooms.push_back(parseRoom(newline == std::string::npos ? "" : v.substr(newline + 1)));
  }
  LinkChoice c = chooseLinks(opts.mode, rank, hosts);
  placement->machineRanks = c.machineRanks;
  placement->machineIndex = c.machineIndex;
  placement->shmDomainOf = c.shmDomainOf;
  if (!opts.slotBytesChosen && c.allTcp) geometry->slotBytes = kTcpSlotBytes;
  if (!c.allTcp) fitSharedMemory(opts, c, rank, rooms, geometry);
  std::unique_ptr<Transport> shm, tcp;
  if (c.shmRanks.size() > 1 || c.tcpRanks.empty()) {
    ShmGeometry g = *geometry;
    g.nranks = static_cast<int>(c.shmRanks.size());
    // Mailbox rounds need every rank of the group in shared memory.
    if (!c.tcpRanks.empty()) g.mailboxBytes = 0;
    const int node = opts.inboxNode ? opts.inboxNode(c.machineIndex, c.machineRanks) : -1;
    shm = std::make_unique<ShmTransport>(store, rank, size, c.shmRanks, g, opts.timeout, node);
  }
  if (!c.tcpRanks.empty()) {
    TcpOptions t;
    t.groupName = opts.groupName;
    t.slotBytes = geometry->slotBytes;
    t.slots = geometry->slots;
    t.timeout = opts.timeout;
    t.listenAddress = opts.listenAddress;
    t.silenceBound = std::chrono::milliseconds(env().linkSilenceMs);
    tcp = std::make_unique<TcpTransport>(store, rank, size, c.tcpRanks, t);
  }
  RING_LOG(kLogInfo, c.shmRanks.size() - 1,
           " peer(s) over shared memory, ", c.tcpRanks.size(), " over TCP (transport ",
           opts.mode, ")");
  if (!tcp) return shm;
  if (!shm) return tcp;
  return std::make_unique<MixedTransport>(rank, size, std::move(shm), std::move(tcp),
                                          std::move(c.viaShm));
}

}  // namespace ring
