// RingBackend's part of torch 2.14's fault-tolerance API (dist._reconfigure, used by torchft):
// the same group object, and the same ProcessGroup in Python, over a new set of members, with
// fresh links. Members exchange their handles out of band, then each calls reconfigure() with
// one fresh uuid and the same handles; the position of a member's handle is its new rank (a
// set of handles is sorted first, as gloo sorts it). A group made with enable_reconfigure=True
// has no links until its first reconfigure(), so a process can join members it never met.
#include "backend/ring_backend.h"

#ifdef C10D_BACKEND_HAS_RECONFIGURE

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <variant>

#include "backend/tensor_checks.h"
#include "common/errors.h"
#include "common/logging.h"
#ifdef RING_WITH_CUDA
#include "backend/cuda_collectives.h"
#include "backend/cuda_route.h"
#endif

namespace ring {
namespace {

// A handle: "ring:<stable rank, six digits>:<host>:<pid>:<uuid of its membership, -1 before
// any>". The stable rank first and zero-padded, so that a sorted set of handles keeps the
// members in the order of their first ranks; host and pid, so that a process that takes a dead
// one's place never has its handle; the uuid, so that a handle names one membership.
constexpr char kHandlePrefix[] = "ring:";

bool wellFormed(const std::string& h) {
  if (h.rfind(kHandlePrefix, 0) != 0) return false;
  return std::count(h.begin(), h.end(), ':') >= 4;
}

int64_t stableRankOf(const std::string& h) {
  return std::stoll(h.substr(sizeof(kHandlePrefix) - 1, h.find(':', sizeof(kHandlePrefix) - 1)));
}

std::string hostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

}  // namespace

c10d::ReconfigureHandle RingBackend::get_reconfigure_handle() const {
  char stable[32];
  std::snprintf(stable, sizeof stable, "%06lld", static_cast<long long>(stableRank_));
  return strCat(kHandlePrefix, stable, ":", hostName(), ":", getpid(), ":", reconfigureUuid_);
}

c10::intrusive_ptr<c10d::Work> RingBackend::reconfigure(const c10d::ReconfigureOptions& opts) {
  CheckScope s{"reconfigure", rank_, size_};
  LogScope logScope(rank_, groupName_);
  std::vector<std::string> handles;
  std::visit([&](const auto& given) { handles.assign(given.begin(), given.end()); }, opts.handles);
  if (std::holds_alternative<std::unordered_set<c10d::ReconfigureHandle>>(opts.handles)) {
    std::sort(handles.begin(), handles.end());
  }
  if (handles.empty()) failUsage(s, "no handles: the new membership needs at least this rank");
  std::set<std::string> distinct;
  for (const std::string& h : handles) {
    if (!wellFormed(h)) {
      failUsage(s, strCat("'", h, "' is not a ring reconfigure handle (one of "
                          "torch.distributed._get_reconfigure_handle() on a ring group)"));
    }
    if (!distinct.insert(h).second) failUsage(s, strCat("handle '", h, "' appears twice"));
  }
  const std::string mine = get_reconfigure_handle();
  const auto at = std::find(handles.begin(), handles.end(), mine);
  if (at == handles.end()) {
    failUsage(s, strCat("this rank's handle '", mine, "' is not among the ", handles.size(),
                        " given: every member passes the handles it got from every member "
                        "since its last reconfigure"));
  }
  if (coalescer_.active()) failUsage(s, "called inside a coalescing block");
  TORCH_CHECK(c10dStore_, "ring: reconfigure on rank ", rank_, " of group '", groupName_,
              "': the group has been shut down");
  const int newRank = static_cast<int>(at - handles.begin());
  const int newSize = static_cast<int>(handles.size());
  const std::chrono::milliseconds timeout =
      opts.timeout ? *opts.timeout : effectiveTimeout(c10d::kUnsetTimeout);
  auto store = c10::make_intrusive<c10d::PrefixStore>(strCat("ring/reconfigure/", opts.uuid, "/"),
                                                       c10dStore_);
  // The uuid names the key space the members meet in; a reused one would meet stale keys. The
  // new rank 0 claims it before anything changes here, so a reuse fails cleanly on that rank
  // (and the others' set-up ends at their timeout, naming it).
  if (newRank == 0) {
    const std::string claimedBy = store->compareSet("claimed", "", mine);
    if (claimedBy != mine) {
      failUsage(s, strCat("uuid ", opts.uuid, " was used before (by '", claimedBy,
                          "'): each reconfigure needs a fresh uuid"));
    }
  }
  RING_LOG(kLogInfo, "reconfigure ", opts.uuid, ": rank ", rank_, " of ", size_,
           " becomes rank ", newRank, " of ", newSize);
  // The old membership's calls still pending fail now rather than wait for members that may
  // be gone; then its links close.
  if (queue_) abort();
  disconnect();
  queue_.reset();  // not connected until connect() succeeds
  std::vector<uint64_t> stableRanks;
  for (const std::string& h : handles) stableRanks.push_back(static_cast<uint64_t>(stableRankOf(h)));
  rank_ = newRank;
  size_ = newSize;
  seq_ = 0;
  ends_.clearLastError();
  options_->global_ranks_in_group = stableRanks;
  try {
    connect(store, timeout);
  } catch (const std::exception& e) {
    reconfigureFailure_ = strCat("its reconfigure to rank ", newRank, " of ", newSize, " (uuid ",
                                 opts.uuid, ") failed: ", e.what());
    throw;
  }
  reconfigureFailure_.clear();
#ifdef RING_WITH_CUDA
  cuda_->allowSetUpAgain();  // on first use, over the new members
#endif
  reconfigureUuid_ = opts.uuid;
  return completedWork({});
}

}  // namespace ring

#endif  // C10D_BACKEND_HAS_RECONFIGURE
