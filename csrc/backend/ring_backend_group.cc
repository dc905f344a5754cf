// RingBackend's group API, apart from the collectives' dispatch in ring_backend.cc: the life of
// the group (construction from its options, shutdown, abort, the effective timeout), the
// coalescing block around its calls (startCoalescing/endCoalescing, and started(), which adds a
// running call's Work to an open block), the settings and what torch reads back (setTimeout,
// getError, getBackendOptions, the completion hook, waitForPendingWorks, the eager CUDA connect
// of init_process_group(device_id)), and the new backends over some of its ranks (split,
// shrink). Same class, same members (ring_backend.h); the definitions live in a file of their
// own so that ring_backend.cc holds only what a collective runs through and each stays readable.
#include "backend/ring_backend.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>

#include "backend/completion_hooks.h"
#include "backend/fr_dump.h"
#include "backend/monitored_barrier.h"
#include "backend/fr_dump_signal.h"
#include "backend/tensor_checks.h"
#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#ifdef RING_WITH_CUDA
#include "backend/cuda_collectives.h"
#include "backend/cuda_route.h"
#include "backend/cuda_sync.h"
#endif

namespace ring {

// ---- construction, shutdown --------------------------------------------------------------------

RingBackend::RingBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, std::string groupName)
    : RingBackend(store, rank, size, [&] {
        auto o = c10::make_intrusive<RingOptions>(timeout);
        o->group_name = std::move(groupName);
        return o;
      }()) {}

RingBackend::RingBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         c10::intrusive_ptr<RingOptions> options)
    : c10d::Backend(rank, size),
      timeoutMs_(options->timeout.count()),
      groupName_(options->group_name.empty() ? "default" : options->group_name),
      c10dStore_(store),
      options_(std::move(options)) {
  stableRank_ = globalRanks()[static_cast<size_t>(rank)];
#ifdef RING_WITH_CUDA
  // The route names the rank of each call's scope: reconfigure() may change it.
  cuda_ = std::make_unique<CudaRoute>(
      [this](const CheckScope& s, const at::Device& device, DedicatedStream& stream) {
        return makeCudaKernels(s, device, stream);
      });
#endif
#ifdef C10D_BACKEND_HAS_RECONFIGURE
  if (options_->enable_reconfigure) {
    // torch's fault-tolerance regime: no links until reconfigure() names the members.
    LogScope logScope(rank, groupName_);
    RING_LOG(kLogInfo, "created for reconfigure(): no links until it is called");
    registerForDumps();
    return;
  }
#endif
  connect(store, options_->timeout);
  registerForDumps();
}

void RingBackend::connect(const c10::intrusive_ptr<c10d::Store>& store,
                          std::chrono::milliseconds timeout) {
  CommOptions opts;
  opts.timeout = timeout;
  opts.groupName = groupName_;
  opts.transport = options_->transport;
  opts.slotBytes = options_->slotBytes;
  opts.slots = options_->slots;
  LogScope logScope(rank_, groupName_);
  try {
    store_ = std::make_unique<TorchStore>(store);
    setupKeys_ = std::make_unique<SetupKeys>(*store_, rank_, size_);
    try {
      RING_LOG(kLogInfo, "set-up number ", setupKeys_->incarnation(), " of this group on its store");
      // Inside this try: a bad knob on one rank must end the others' set-up too.
      recorder_.setCapacity(env().flightRecorderEntries);
      armFlightRecorderDumpOnSignal(static_cast<int>(globalRanks()[static_cast<size_t>(rank_)]));
      comm_ = std::make_unique<Communicator>(*setupKeys_, rank_, size_, opts);
    } catch (const std::exception& e) {
      reportSetupFailure(*setupKeys_, rank_, e.what());
      throw;
    }
  } catch (const CommError& e) {
    C10_THROW_ERROR(DistBackendError, e.what());
  } catch (const RingError& e) {
    TORCH_CHECK(false, e.what());
  }
  queue_ = WorkQueue::make(rank_, groupName_, *comm_, recorder_, ends_);
}

void RingBackend::refuseUnconnected(const CheckScope& s) const {
  if (!reconfigureFailure_.empty()) {
    failUsage(s, strCat("group '", groupName_, "' has no members: ", reconfigureFailure_,
                        "; call torch.distributed._reconfigure(uuid, handles) again, with a "
                        "fresh uuid, on every member"));
  }
  failUsage(s, strCat("group '", groupName_, "' was created with enable_reconfigure=True and "
                      "has no members yet: call torch.distributed._reconfigure(uuid, handles) "
                      "on every member first"));
}

void RingBackend::registerForDumps() {
  registerGroupForDumps(this, &recorder_, [this] {
    return DumpedGroupConfig{dumpGroupUid(), getGroupDesc(), globalRanks()};
  });
}

RingBackend::~RingBackend() {
  shutdown();
  unregisterGroupForDumps(this);
}

CommProfileGroup RingBackend::profileGroup() const {
  CommProfileGroup g;
  g.name = getGroupUid().empty() ? groupName_ : getGroupUid();
  g.desc = getGroupDesc();
  g.rank = rank_;
  g.size = size_;
  std::tie(g.globalRankStart, g.globalRankStride) =
      globalRankLayout(options_->global_ranks_in_group, size_);
  return g;
}

std::string RingBackend::dumpGroupUid() const {
  return getGroupUid().empty() ? groupName_ : getGroupUid();
}

std::vector<int64_t> RingBackend::globalRanks() const {
  std::vector<int64_t> ranks;
  for (uint64_t r : options_->global_ranks_in_group) ranks.push_back(static_cast<int64_t>(r));
  if (ranks.empty()) {  // the default group: global rank = group rank
    for (int r = 0; r < size_; ++r) ranks.push_back(r);
  }
  return ranks;
}

void RingBackend::shutdown() {
  disconnect();
  std::lock_guard<std::mutex> commLock(commMutex_);
  c10dStore_.reset();
}

void RingBackend::disconnect() {
  LogScope logScope(rank_, groupName_);
  // Queued collectives still run (each bounded by its timeout) so that their Works complete.
  if (queue_) queue_->stop();
  {
    std::lock_guard<std::mutex> lock(p2pMutex_);
    p2p_.reset();
  }
#ifdef RING_WITH_CUDA
  cuda_->shutdown();
#endif
  // The rest goes now rather than with the last reference to the group (Python code often
  // keeps a subgroup object around): the links with their threads, sockets and shared memory,
  // and the store, whose TCPStore server would otherwise outlive destroy_process_group().
  std::lock_guard<std::mutex> commLock(commMutex_);
  comm_.reset();
  setupKeys_.reset();
  store_.reset();
}

void RingBackend::abort() {
  LogScope logScope(rank_, groupName_);
  abortHooks_.runOnce(rank_, groupName_, "by abort()");
  {
    std::lock_guard<std::mutex> lock(commMutex_);
    if (comm_) comm_->abort("abort() was called on this rank");
  }
  if (queue_) queue_->dropPending();
  std::lock_guard<std::mutex> lock(p2pMutex_);
  if (p2p_) p2p_->failAll(strCat("ring: rank ", rank_, " aborted the group"));
}

// ---- coalescing ---------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> RingBackend::started(c10::intrusive_ptr<c10d::Work> work) {
  if (coalescer_.active()) coalescer_.include(work);
  return work;
}

void RingBackend::startCoalescing() { coalescer_.begin(rank_); }

c10::intrusive_ptr<c10d::Work> RingBackend::endCoalescing() {
  Coalescer::Block block = coalescer_.end(rank_);
  std::vector<c10::intrusive_ptr<c10d::Work>> parts = std::move(block.started);
  if (!block.held.empty()) {
    const auto concatenation = [this](const CallInfo& c, const Tensors& tensors,
                                      const AllReduceKey& k) {
      allReduceConcatenation(c, tensors, k);
    };
    // A held call without a body is one collective over its first input and output.
    const auto runOne = [this](const CallInfo& c, const HostCall& call) {
      if (call.body) {
        call.body(c, call.inputs, call.outputs);
        return;
      }
      const auto first = [](const Tensors& v) { return v.empty() ? nullptr : v[0].data_ptr(); };
      comm_->run(comm_->prepare(*call.collective, c.seq), first(call.inputs), first(call.outputs),
                 c);
    };
    HostCall fused = fuseHeld(block.held, concatenation, runOne);
    auto task = push("coalesced", seq_++, std::move(fused));
    // Each caller's Work completes with the block's task (on the worker, right after it).
    std::vector<c10::intrusive_ptr<RingWork>> members;
    for (const auto& h : block.held) members.push_back(h.work);
    task->getFuture()->addCallback([this, members](c10::ivalue::Future& f) {
      for (const auto& m : members) {
        if (!f.hasError()) ends_.succeeded(m->completionKey(), std::nullopt);
        m->complete(f.hasError() ? f.exception_ptr() : nullptr);
      }
    });
    parts.insert(parts.begin(), task);
  }
  return allOf(rank_, c10d::OpType::COALESCED, std::move(parts));
}

// ---- settings, hooks, what torch reads back ----------------------------------------------------

void RingBackend::setTimeout(std::chrono::milliseconds timeout) {
  // For the calls made from now on (each call keeps the timeout it started with).
  timeoutMs_.store(timeout.count());
  options_->timeout = timeout;
}

c10d::ErrorType RingBackend::getError() { return ends_.lastError(); }

c10::intrusive_ptr<c10d::Backend::Options> RingBackend::getBackendOptions() { return options_; }

void RingBackend::registerOnCompletionHook(
    std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) {
  // One hook, two holders, no copy of it (a Python hook's copy would touch its reference count
  // without the GIL): c10d::Backend's own member, which its hasHooks() reads (torch's
  // destroy_process_group waits for pending works only if it says yes), and our thread.
  auto shared = std::make_shared<std::function<void(std::shared_ptr<c10d::WorkInfo>)>>(
      std::move(hook));
  auto call = [shared](std::shared_ptr<c10d::WorkInfo> info) { (*shared)(std::move(info)); };
  TORCH_CHECK(ends_.setHook(call, rank_, groupName_), "ring: rank ", rank_,
              ": a completion hook is already registered on group '", groupName_,
              "' (one per group, as in ProcessGroupNCCL)");
  onCompletionHook_ = call;
}

void RingBackend::dumpAfterFailure() {
  const std::vector<int64_t> ranks = globalRanks();
  dumpAfterFailureOnce(static_cast<int>(ranks[static_cast<size_t>(rank_)]));
}

void RingBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  LogScope logScope(rank_, groupName_);
  MonitoredBarrierCall c{rank_, size_, groupName_, monitoredBarriers_++,
                         effectiveTimeout(opts.timeout), waitAllRanks};
  TORCH_CHECK(c10dStore_, "ring: monitored_barrier on rank ", rank_, " of group '", groupName_,
              "': the group has been shut down");
  // Beyond gloo: where the ranks share memory, how far each missing rank had got.
  auto describeRank = [this](int r) -> std::string {
    std::lock_guard<std::mutex> lock(commMutex_);
    uint64_t theirs = 0, mine = 0;
    if (!comm_ || !comm_->transport().issuedBy(r, &theirs) ||
        !comm_->transport().issuedBy(rank_, &mine)) {
      return "";
    }
    if (theirs == mine) {
      return strCat("it had issued the same ", mine, " collective(s) of the group as rank ",
                    rank_, ": it is not inside one of them");
    }
    if (theirs < mine) {
      return strCat("it had issued ", theirs, " collective(s) of the group, rank ", rank_, " ",
                    mine, ": it is behind, not yet past collective sequence ", theirs,
                    " (its flight recorder shows where it waits)");
    }
    return strCat("it had issued ", theirs, " collective(s) of the group, rank ", rank_, " ",
                  mine, ": it is ahead, inside or past a collective rank ", rank_,
                  " has not issued");
  };
  runMonitoredBarrier(*c10dStore_, c, describeRank);
}

void RingBackend::enableCollectivesTiming() {
#ifdef RING_WITH_CUDA
  cuda_->timeKernels();
#endif
}

void RingBackend::waitForPendingWorks() {
  // Each bounded by its timeout. torch calls this from destroy_process_group so that pending
  // completion hooks finish before the interpreter may go: it waits, it does not judge. A
  // kernel failure has reached its Work (wait, exception) and broken the group, so the next
  // collective raises; raising here as well would leave a failed group impossible to destroy.
  if (queue_) queue_->waitIdle();
  try {
    waitCudaWork();
  } catch (const CommError&) {
  }
  {
    std::lock_guard<std::mutex> lock(p2pMutex_);
    if (p2p_) p2p_->waitIdle();
  }
  // Last: every call above has posted its hook call by now.
  ends_.waitForHooks();
}

void RingBackend::eagerConnectSingleDevice(at::Device device) {
#ifdef RING_WITH_CUDA
  if (!device.is_cuda()) return;
  LogScope logScope(rank_, groupName_);
  cuda_->setUp(CheckScope{"init_process_group(device_id)", rank_, size_}, device);
#else
  (void)device;
#endif
}

// ---- new backends over some of the ranks: split, merge and shrink ----------------------------------------

namespace {

// The options a child group starts from: torch's (if they are ours), else the parent's.
c10::intrusive_ptr<RingOptions> childOptions(const c10::intrusive_ptr<c10d::Backend::Options>& given,
                                             const RingOptions& parent) {
  if (auto ours = c10::dynamic_intrusive_pointer_cast<RingOptions>(given)) {
    return c10::make_intrusive<RingOptions>(*ours);
  }
  auto child = c10::make_intrusive<RingOptions>(parent);
#ifdef C10D_BACKEND_HAS_RECONFIGURE
  child->enable_reconfigure = false;  // a child is set up now, over the parent's members
#endif
  if (given) {
    if (given->timeout.count() > 0) child->timeout = given->timeout;
    child->group_name = given->group_name;
  }
  return child;
}

}  // namespace

c10::intrusive_ptr<c10d::Backend> RingBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                      const std::vector<int>& ranks,
                                                      const c10::intrusive_ptr<Options>& opts) {
  CheckScope s{"split", rank_, size_};
  for (int r : ranks) checkRoot(s, r, "rank of the new group");
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) return nullptr;  // not a member: nothing to set up here
  auto options = childOptions(opts, *options_);
  if (options->group_name.empty()) options->group_name = groupName_ + ":split";
  // The new group's rank is the position in `ranks` (torch's order).
  return c10::make_intrusive<RingBackend>(store, static_cast<int>(it - ranks.begin()),
                                          static_cast<int>(ranks.size()), options);
}

c10::intrusive_ptr<c10d::Backend> RingBackend::merge(const c10::intrusive_ptr<c10d::Store>& store,
                                                      const c10::intrusive_ptr<Options>& opts,
                                                      const int& rank, const int& size) {
  CheckScope s{"merge_remote_group", rank_, size_};
  if (size < 1 || rank < 0 || rank >= size) {
    failUsage(s, strCat("rank ", rank, " of a merged group of ", size, " ranks: expected a rank in "
                        "[0, size) (more ranks reached the store than the size given?)"));
  }
  auto options = childOptions(opts, *options_);
  if (options->group_name.empty()) options->group_name = groupName_ + ":merge";
  {
    LogScope logScope(rank_, groupName_);
    RING_LOG(kLogInfo, "merging into a group of ", size, " ranks as rank ", rank);
  }
  // The merged group's own links, made through the store every member shares; this group
  // stays as it is.
  return c10::make_intrusive<RingBackend>(store, rank, size, options);
}

c10::intrusive_ptr<c10d::Backend> RingBackend::shrink(const std::vector<int64_t>& ranksToExclude,
                                                       int shrinkFlags,
                                                       const c10::intrusive_ptr<Options>& optsOverride) {
  CheckScope s{"shrink_group", rank_, size_};
  if (ranksToExclude.empty()) failUsage(s, "no rank to exclude");
  std::vector<int64_t> excluded = ranksToExclude;
  std::sort(excluded.begin(), excluded.end());
  for (int64_t r : excluded) checkRoot(s, r, "rank to exclude");
  if (std::binary_search(excluded.begin(), excluded.end(), int64_t{rank_})) {
    failUsage(s, strCat("rank ", rank_, " cannot exclude itself; only the ranks that stay call it"));
  }
  if (static_cast<int>(excluded.size()) >= size_) failUsage(s, "every rank would be excluded");
  // SHRINK_ABORT (1): stop what is still pending on this group first.
  if (shrinkFlags & 1) abort();
  // Every rank that stays runs this with the same list, the same number of times: the same
  // key space of the group's store, without talking.
  std::string prefix = strCat("ring/shrink/", shrinks_++, "/");
  for (int64_t r : excluded) prefix += strCat(r, ",");
  const int below = static_cast<int>(std::lower_bound(excluded.begin(), excluded.end(),
                                                      int64_t{rank_}) - excluded.begin());
  auto options = childOptions(optsOverride, *options_);
  options->group_name = groupName_ + ":shrunk";
  {
    LogScope logScope(rank_, groupName_);
    RING_LOG(kLogInfo, "shrinking without ", excluded.size(), " rank(s); this rank becomes rank ",
             rank_ - below, " of ", size_ - static_cast<int>(excluded.size()));
  }
  return c10::make_intrusive<RingBackend>(c10::make_intrusive<c10d::PrefixStore>(prefix, c10dStore_),
                                          rank_ - below, size_ - static_cast<int>(excluded.size()),
                                          options);
}

StragglerReport RingBackend::stragglerReport(double thresholdMs) const {
  StragglerReport report;
  {
    std::lock_guard<std::mutex> lock(commMutex_);
    if (comm_) report = comm_->stragglerReport(thresholdMs);
  }
  // The first failure: what every later call of the broken group only repeats.
  for (const FlightEntry& e : recorder_.snapshot()) {
    if (e.state == "failed") {
      report.failure = strCat(e.collective, " #", e.seq, ": ", e.error);
      break;
    }
  }
  return report;
}

}  // namespace ring
