// The Communicator as a group: its set-up (links, layout, plan settings; the choices made once
// for the group are in group_setup.cc), its health and abort. Its collectives are in
// reducing_collectives.cc and moving_collectives.cc, the guard and wait context each runs in
// in communicator_calls.h; what a call does at issue in communicator_issue.cc.
#include "executor/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/cpu_binding.h"
#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "executor/group_setup.h"
#include "reduce/reduce_table.h"
#include "transport/host_identity.h"
#include "transport/select.h"

namespace ring {


Communicator::Communicator(Store& store, int rank, int size, const CommOptions& opts)
    : rank_(rank), size_(size), groupName_(opts.groupName), issues_(rank, size) {
  RING_USAGE_CHECK(size >= 1 && rank >= 0 && rank < size, "ring: invalid rank ", rank,
                   " for a group of size ", size);
  // Set-up's log lines name this rank and group (also when the backend is not the caller).
  LogScope logScope(rank, opts.groupName);
  ShmGeometry g;
  g.nranks = size;
  g.slotBytes = opts.slotBytes > 0 ? opts.slotBytes : env().slotBytes;
  g.slots = opts.slots > 0 ? opts.slots : env().slots;
  g.mailboxBytes = opts.mailboxBytes >= 0 ? opts.mailboxBytes : env().mailboxBytes;
  g.singleCopyBytes = opts.singleCopyBytes >= 0 ? opts.singleCopyBytes : env().singleCopyBytes;
  // A step that receives and sends holds its received slot until its own message is out, so
  // one slot per FIFO deadlocks a ring (tests/cpp/test_plans.cc shows it); two always suffice.
  RING_USAGE_CHECK(g.slots >= 2, "ring: a FIFO needs at least 2 slots, got ", g.slots);
  TransportOptions t;
  t.mode = opts.transport.empty() ? env().transport : opts.transport;
  t.hostId = opts.hostId.empty() ? hostIdentity() : opts.hostId;
  t.groupName = opts.groupName;
  t.listenAddress = opts.listenAddress;
  t.timeout = opts.timeout;
  t.slotBytesChosen = opts.slotBytes > 0 || env().slotBytesSet;
  t.slotsChosen = opts.slots > 0 || env().slotsSet;
  t.shmBudget = env().shmBudget;
  // TORCH_RING_CPU_BIND=numa: each rank's inbox on the node its thread is bound to below (read
  // from the tree once: the inbox and the binding must agree).
  std::optional<std::vector<NumaNode>> numa;
  if (env().cpuBind == "numa") {
    numa = numaNodesBeside(env().cpuSysfs);
    t.inboxNode = [&numa](int machineIndex, int machineRanks) {
      return nodeForRank(numa, machineIndex, machineRanks);
    };
  }
  GroupPlacement placement;
  plans_.forced = parseAlgoKnob(opts.algo.empty() ? env().algo : opts.algo);
  plans_.rdBytes = opts.rdBytes >= 0 ? opts.rdBytes : env().rdBytes;
  plans_.directBytes = opts.directBytes >= 0 ? opts.directBytes : env().directBytes;
  plans_.shmLink = parseLinkCost(opts.shmLink.empty() ? env().shmLink : opts.shmLink,
                                 "TORCH_RING_SHM_LINK", kDefaultShmLink);
  plans_.netLink = parseLinkCost(opts.netLink.empty() ? env().netLink : opts.netLink,
                                 "TORCH_RING_NET_LINK", kDefaultNetLink);
  checkPlanSettings(plans_);  // before any store traffic, as the transport's mode
  transport_ = connectGroup(store, rank, size, t, &g, &placement);
  const int localRanks = placement.machineRanks;
  layout_ = layoutFromGroups(placement.shmDomainOf);
  plans_.slotBytes = g.slotBytes;
  hostRing_ = hostMajorRing(layout_);
  hostRingPos_.resize(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) {
    hostRingPos_[static_cast<size_t>(hostRing_[static_cast<size_t>(i)])] = i;
  }
  agreeOnPlans(store, rank, size, settingsLine(plans_, layout_), opts.timeout);
  // After connect: an all-TCP group may have chosen larger slots; the plans slice by them.
  slotBytes_ = g.slotBytes;
  const SpinChoice spin = chooseSpin(localRanks, transport_->onlySharedMemory());
  spinMicros_ = spin.micros;
  ownCore_ = spin.ownCore;
  if (env().cpuBind == "core") bindToCore(placement.machineIndex, localRanks);
  if (env().cpuBind == "numa") bindToNode(numa, placement.machineIndex, localRanks);
  // After the binding: a bound rank's caches are its one CPU's.
  if (size > 1) {
    copyChoice_.startWith(chooseCopyStart(store, rank, size, placement.shmDomainOf,
                                          env().cpuSysfs, threadCpus(), opts.timeout));
  }
  // What the plan of a call depends on besides the knobs: the group, its memory, its mailboxes.
  plans_.ranks = size;
  plans_.oneSharedMemory = size > 1 && transport_->onlySharedMemory();
  if (Mailbox* box = transport_->mailbox()) plans_.mailboxBytes = box->capacity();
  if (rank == 0) {
    RING_LOG(kLogInfo, size, " ranks, ring order 0 -> 1 -> ... -> ",
             size - 1, " -> 0; ", layout_.hosts(), " host(s); plans ",
             settingsLine(plans_, layout_));
  }
  // Which build of the host reductions this rank runs (ranks on other CPUs may run another:
  // the same bits, reduce_table.h); asked here, a TORCH_RING_CPU_ISA this CPU cannot serve
  // fails set-up rather than the first reduction.
  RING_LOG(kLogInfo, "host reductions: ", hostIsaName(hostIsa()),
           " build (TORCH_RING_CPU_ISA=", env().cpuIsa, ")");
  if (size > 1) {
    // The two ring links of this rank, each with its transport.
    RING_LOG(kLogInfo, "next ", transport_->describeLink(ringNext(rank, size)));
    if (size > 2) {
      RING_LOG(kLogInfo, "prev ",
               transport_->describeLink(ringPrev(rank, size)));
    }
  }
}

Communicator::~Communicator() = default;

void Communicator::checkHealth() { transport_->checkHealth(-1); }

void Communicator::abort(const std::string& reason) {
  transport_->markBroken(strCat("rank ", rank_, " aborted the group: ", reason));
  transport_->abortLocal(reason);
}

void Communicator::releaseLargeStaging() {
  if (staging_.capacity() > kKeptStagingBytes) std::vector<char>().swap(staging_);
}


}  // namespace ring
