// A group of ranks and the collectives it runs on host memory: the torch-free heart of the
// backend. A call is data (CollectiveArgs): prepare plans it once, run runs it over a pair of
// buffers. The backend layer turns tensors into pointers and counts and hands calls to it on
// its runner (backend/work_queue.h); C++ tests do the same with threads as ranks
// (tests/cpp/collective_calls.h).
//
// Every call takes the collective's sequence number (the same on every rank) and a timeout
// that bounds every wait inside it. A communication failure (timeout, dead peer, mismatch)
// marks the whole group broken, so that every rank's current or next call fails fast with the
// first rank's reason, instead of hanging.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/types.h"
#include "executor/call_estimate.h"
#include "executor/plan_choice.h"
#include "executor/prepared_call.h"
#include "executor/straggler_stats.h"
#include "schedule/host_layout.h"
#include "transport/link.h"
#include "transport/store.h"

namespace ring {

struct CommOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  // for set-up
  std::string groupName = "default";
  int64_t slotBytes = 0;  // 0: TORCH_RING_SLOT_BYTES
  int slots = 0;          // 0: TORCH_RING_SLOTS
  // "auto", "shm" or "tcp"; empty: TORCH_RING_TRANSPORT (see common/env.h).
  std::string transport;
  // This rank's host identity; empty: hostIdentity(). Ranks with equal ids share memory
  // (tests set it to make threads of one process look like ranks on several hosts).
  std::string hostId;
  // IPv4 or IPv6 address the TCP transport listens on; empty: TORCH_RING_SOCKET_IFNAME /
  // MASTER_ADDR.
  std::string listenAddress;
  // Largest message of a direct collective (executor/direct_collectives.h); -1:
  // TORCH_RING_DIRECT_BYTES, 0: never.
  int64_t directBytes = -1;
  // TORCH_RING_SHM_LINK / TORCH_RING_NET_LINK's "ALPHA_SECONDS,BYTES_PER_SECOND": what auto
  // prices the flat ring and two levels with (executor/plan_choice.h); empty: the variable.
  std::string shmLink;
  std::string netLink;
  // Largest message of a mailbox round (transport/link.h, Mailbox); -1: TORCH_RING_LL_BYTES,
  // 0: never.
  int64_t mailboxBytes = -1;
  // Smallest ring message lent to a peer on this host (transport/link.h, SendLink::lendsFrom);
  // -1: TORCH_RING_SINGLE_COPY_BYTES, 0: never.
  int64_t singleCopyBytes = -1;
  // The collectives' plans between hosts (executor/plan_choice.h); empty: TORCH_RING_ALGO.
  std::string algo;
  // auto's recursive-doubling limit in bytes; -1: TORCH_RING_RD_BYTES.
  int64_t rdBytes = -1;
};

struct CallInfo {
  uint64_t seq;
  std::chrono::milliseconds timeout;
  // Where to write the name of the plan the call takes (callPlanName: "direct/mailbox",
  // "ring", ...; static text), for the flight recorder; null: nowhere.
  const char** plan = nullptr;
  // The call planned at issue (Communicator::prepare), maybe posted ahead; null: the collective
  // plans itself when it runs.
  const PreparedCall* prepared = nullptr;
};

class Communicator {
 public:
  // Collective over the group: sets up the links to every peer through `store`.
  Communicator(Store& store, int rank, int size, const CommOptions& opts);
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& groupName() const { return groupName_; }
  // Busy-polling budget of a wait (chooseSpin): the point-to-point engine uses it too.
  int spinMicros() const { return spinMicros_; }
  Transport& transport() { return *transport_; }

  // Byte counts and offsets per peer; sendCounts[r] bytes go to rank r, recvCounts[r] bytes
  // arrive from rank r.
  void allToAll(const void* input, void* output, const std::vector<int64_t>& sendCounts,
                const std::vector<int64_t>& sendOffsets, const std::vector<int64_t>& recvCounts,
                const std::vector<int64_t>& recvOffsets, DType t, const CallInfo& c);

  // A call as data (prepared_call.h): plans it once, for sequence `seq`: its fingerprint, its
  // plan (chooseCallPlan) and the function that runs that plan. Cheap, waits for nothing, and
  // the same on every rank.
  PreparedCall prepare(const CollectiveArgs& args, uint64_t seq) const;
  // The group's choice of how to copy into shared memory (copy_choice.h), for tests and logs.
  const CopyChoice& copyChoice() const { return copyChoice_; }
  // Runs prepared call `p` over `input` and `output`. What each collective reads and writes
  // (CollectiveArgs's counts):
  //   all_reduce   in place on `output`. PREMUL_SUM multiplies every contribution by the
  //                factor first; AVG divides the sum by the group size (integers truncate
  //                toward zero).
  //   reduce_scatter  input: size * count elements, not modified; output: count.
  //   all_gather   input: count elements (may alias block `rank` of output); output: size *
  //                count, block r from rank r.
  //   broadcast    in place on `output`.
  //   reduce       input: count elements, not modified; output (written on the root only).
  //   gather       output (root only): size * count elements, block r from rank r.
  //   scatter      input (root only): size * count elements, block r to rank r.
  //   barrier      neither.
  void run(const PreparedCall& p, const void* input, void* output, const CallInfo& c);
  // Runs the call `args` describes: as c.prepared where the runner prepared it at issue (which
  // must describe `args` at c.seq: another is a bug of the caller, named), else prepared now.
  void run(const CollectiveArgs& args, const void* input, void* output, const CallInfo& c);
  // Posting ahead: where `p` is one mailbox round of an all_reduce, all_gather or barrier, this
  // rank's message (an all_reduce's `output`, an all_gather's `input`) is posted now and true
  // returned, without waiting for anyone; otherwise nothing is done (false). The call itself,
  // run next with c.prepared = &p, then only reads the peers' messages. Throws, posting
  // nothing, where the group is already broken (as the call would).
  //
  // Why: a rank's issuing thread asks whether every peer has issued a small call before it
  // runs the call itself (backend/work_queue.h), and each rank then waits for the others twice
  // per call, for their announcements and for their messages: two dependent exchanges between
  // the cores. Posted before that question, and the question answered by the peers' messages
  // (allIssued), a call waits for its peers once (docs/notes/latency_cpu.md, ninth part).
  bool post(PreparedCall& p, const void* input, void* output);

  // This rank has issued `count` collectives of the group: told to the peers where the
  // transport can (Transport::announces), with the time; the issue times of the earlier
  // collectives that every rank has issued go into the straggler statistics (in batches:
  // IssueTimes).
  void announceIssued(uint64_t count);
  // Who the others waited for, over the group's last collectives, up to the last that every
  // rank has issued (shared memory groups: the ranks of one host share a clock; elsewhere it
  // stays empty). Any thread.
  StragglerReport stragglerReport(double thresholdMs) {
    return issues_.report(*transport_, thresholdMs);
  }
  // Whether every rank has issued `count` collectives, waiting up to `patience` for it (a busy
  // poll). Always false where the transport cannot tell. Where this rank has posted the last of
  // them ahead (`posted`: post), it looks for the peers' posts of that round first.
  bool allIssued(uint64_t count, std::chrono::microseconds patience,
                 const PreparedCall* posted = nullptr);

  // The hosts of the group as its plans see them: ranks that share memory (select.h).
  const HostLayout& layout() const { return layout_; }
  // The plan of a call of collective `k` (`bytes`: an all_reduce's buffer, one rank's part of
  // an all_gather or reduce_scatter), chosen in one place: chooseCallPlan (plan_choice.h).
  CallPlan planOf(Collective k, int64_t bytes) const {
    return chooseCallPlan(plans_, layout_, k, bytes);
  }
  // What such a call is expected to take, in seconds (executor/call_estimate.h).
  double estimatedSeconds(Collective k, int64_t bytes) const;
  // Its algorithm: an all_reduce (Algorithm::Direct, Ring, HierRing, HierRd, HierRadix or
  // HierDirect), an all_gather (Direct, Ring, HierRing or HierDirect), a reduce_scatter (Ring,
  // HierRing or HierDirect), a broadcast (Ring or HierRing).
  Algorithm allReducePlan(int64_t bytes) const {
    return planOf(Collective::AllReduce, bytes).algorithm;
  }
  Algorithm allGatherPlan(int64_t partBytes) const {
    return planOf(Collective::AllGather, partBytes).algorithm;
  }
  Algorithm reduceScatterPlan(int64_t partBytes) const {
    return planOf(Collective::ReduceScatter, partBytes).algorithm;
  }
  Algorithm broadcastPlan() const { return planOf(Collective::Broadcast, 0).algorithm; }

  // Fails every current and future wait of this rank with `reason`, and tells the others.
  void abort(const std::string& reason);
  // Throws if the group is already broken or aborted (cheap; called before each collective).
  void checkHealth();
  // Builds the WaitContext of one call ("all_reduce of ... on rank r of group g"). It refers to
  // `fp`, which must outlive it. Inline in communicator_calls.h, beside guarded(), its caller.
  WaitContext waitContext(const Fingerprint& fp, const CallInfo& c);

 private:
  // The plan table (communicator_issue.cc): one row per plan of a collective, its function
  // and its price. Throws (a fault of the choice) for a plan without a row.
  struct PlanRow;
  static const PlanRow& planRow(Collective k, Algorithm a, bool mailbox);
  // The plan functions (PlanFunction, prepared_call.h): prepare picks one per call from the
  // table (oneRank on a group of one), and run() calls it inside guarded(), after PREMUL_SUM's
  // scaling (premultiplied). Reducing collectives in reducing_collectives.cc, the others in
  // moving_collectives.cc.
  void allReduceMailbox(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  void allReduceDirect(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  void allReduceTwoLevels(const PreparedCall& p, const void* in, void* out,
                          const WaitContext& ctx);
  void allReduceRing(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  void reduceScatterTwoLevels(const PreparedCall& p, const void* in, void* out,
                              const WaitContext& ctx);
  void reduceScatterRing(const PreparedCall& p, const void* in, void* out,
                         const WaitContext& ctx);
  void reduceRing(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  void barrierMailbox(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  void barrierRing(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  void allGatherMailbox(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  void allGatherDirect(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  void allGatherTwoLevels(const PreparedCall& p, const void* in, void* out,
                          const WaitContext& ctx);
  void allGatherRing(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  void broadcastHostChain(const PreparedCall& p, const void* in, void* out,
                          const WaitContext& ctx);
  void broadcastRing(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  void gatherPairwise(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  void scatterPairwise(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  // Every collective on a group of one rank: nothing to exchange.
  void oneRank(const PreparedCall& p, const void* in, void* out, const WaitContext& ctx);
  // What a reducing call contributes under PREMUL_SUM: its input times the factor. An
  // all_reduce scales `output` in place (once: not again after post() did); reduce_scatter and
  // reduce must leave the caller's input as it is, so they read a scaled copy in `*scaled`.
  // Returns the input the plan reads.
  const void* premultiplied(const PreparedCall& p, const void* input, void* output,
                            std::vector<char>* scaled) const;
  // Runs one call whose messages carry `fp`, under plan `plan` (its name, for c.plan).
  template <typename Body>
  void guarded(const Fingerprint& fp, const char* plan, const CallInfo& c, Body&& body);
  // Polls done() until it holds (true) or `patience` has passed (false): allIssued's wait.
  template <typename Done>
  bool pollFor(std::chrono::microseconds patience, Done&& done);
  // The mailbox a call of plan `p` runs its one round in; null where it takes another path
  // (then it cannot be posted ahead: post).
  Mailbox* mailboxOf(const CallPlan& p) const {
    return p.mailboxRound ? transport_->mailbox() : nullptr;
  }
  int rank_;
  int size_;
  std::string groupName_;
  int64_t slotBytes_;
  int spinMicros_ = 0;
  // Whether every rank of this host has a core of its own (the long spin: chooseSpin).
  bool ownCore_ = false;
  std::unique_ptr<Transport> transport_;
  HostLayout layout_;
  // hostMajorRing(layout_) and each rank's place on it (broadcast between hosts).
  std::vector<int> hostRing_;
  std::vector<int> hostRingPos_;
  PlanSettings plans_;
  // The sequence of the call posted ahead (post) until that call runs, kNoPost otherwise: a
  // call that runs meanwhile is a bug of the caller (guarded() names it), since the peers
  // would read the post as its message. Set by the issuing thread, read by whichever thread
  // then runs the call: the caller orders the two (the backend holds the group from the post
  // to the call, and hands it over under a mutex).
  static constexpr uint64_t kNoPost = UINT64_MAX;
  uint64_t postedSeq_ = kNoPost;
  // hostSegments(layout_, count) of the last two-level all_reduce: DDP's buckets repeat sizes.
  int64_t segmentsCount_ = -1;
  std::vector<HostSegment> segments_;
  // The two-level all_gather's and reduce_scatter's staging buffer (the size of the gathered
  // output), kept between calls up to kKeptStagingBytes: small calls repeat in a loop and
  // would pay an allocation each; a large one's copy of a whole layer (FSDP) is not held
  // beyond its call, where an allocation costs little beside the network.
  static constexpr size_t kKeptStagingBytes = 16u << 20;
  void releaseLargeStaging();
  std::vector<char> staging_;
  // Issue times: collected on the issuing thread (announceIssued), read by report calls.
  IssueTimes issues_;
  // Whether each call's copies into shared memory stream, measured on the calls themselves:
  // asked at prepare (issue order, const: the choice is the group's bookkeeping, not its state),
  // told the trials' times at the end of run.
  mutable CopyChoice copyChoice_;
};

}  // namespace ring
