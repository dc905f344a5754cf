#include "executor/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/cpu_binding.h"
#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "executor/cpu_executor.h"
#include "executor/direct_collectives.h"
#include "executor/hier_all_reduce.h"
#include "executor/hier_gather_scatter.h"
#include "executor/mailbox_collectives.h"
#include "reduce/reduce_table.h"
#include "schedule/ring_plan.h"
#include "transport/host_identity.h"
#include "transport/select.h"

namespace ring {

namespace {

// Why adaptive: a waiter that spins answers within a microsecond when its peer runs on another
// core (2 ranks on 2 cores: 13 us per small all_reduce instead of 50-170 us through futex
// wake-ups), but when ranks outnumber cores a long spin takes the core from the very rank it
// waits for (4 ranks on 2 cores, 500 us spins with every call handed to a worker thread: 2-5x
// slower). So a long spin only when this host's ranks of the group fit on the cores this
// process may use, and a short one otherwise (below).
// The spin where every rank of the host has a core of its own (see below).
constexpr int kOwnCoreSpinMicros = 500;

// The CPUs this process's ranks of a machine share: those it had before TORCH_RING_CPU_BIND
// bound its thread to one of them (a later group, made on that thread, still counts them all).
int usableCores() { return std::max<int>(1, static_cast<int>(processCpuBinder().usable().size())); }

int chooseSpin(int localRanks, bool onlySharedMemory) {
  if (env().spinMicros >= 0) return env().spinMicros;
  const int cores = usableCores();
  // 500 us covers a peer's turnaround, including its caller-to-worker thread hand-off, with
  // room to spare (measured on 2 cores: 50 us often expired just before the peer arrived and
  // then paid for the futex round trip on top), and still bounds what a wait can waste when
  // the peer has been descheduled after all.
  if (localRanks <= cores) return kOwnCoreSpinMicros;
  // More ranks than cores. A waiter spins with a yield every 64 pauses (wait.cc), so the rank
  // it waits for runs as soon as it is runnable; sleeping at once instead costs a futex wake
  // and a context switch per message. Measured, 4 ranks on 2 cores, shared memory: all_reduce
  // of 4 KiB in 48-99 us with 20-100 us of spin against 140-244 us with none, 1 MiB in
  // 220 us against 290-400, 16 MiB alike. Over TCP the I/O threads must run to move the data,
  // and spinning ranks took their CPU (4 ranks on 2 cores: 0.3-0.6 GB/s instead of 0.8).
  return onlySharedMemory ? 50 : 0;
}

int64_t sliceElems(int64_t slotBytes, DType t) {
  return slotBytes / static_cast<int64_t>(elementSize(t));
}

InterHostPlan interHostPlan(AllReduceChoice&& choice) {
  InterHostPlan p;
  const Algorithm a = choice.algorithm;
  if (a == Algorithm::HierRd || a == Algorithm::HierRadix) {
    p.kind = InterHostKind::Rounds;
    p.schedule = std::move(choice.rounds);
  } else if (a == Algorithm::HierDirect) {
    p.kind = InterHostKind::Direct;
  }
  return p;
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

}  // namespace

Communicator::Communicator(Store& store, int rank, int size, const CommOptions& opts)
    : rank_(rank), size_(size), groupName_(opts.groupName), stragglers_(size) {
  RING_USAGE_CHECK(size >= 1 && rank >= 0 && rank < size, "ring: invalid rank ", rank,
                   " for a group of size ", size);
  // Set-up's log lines name this rank and group (also when the backend is not the caller).
  LogScope logScope(rank, opts.groupName);
  ShmGeometry g;
  g.nranks = size;
  g.slotBytes = opts.slotBytes > 0 ? opts.slotBytes : env().slotBytes;
  g.slots = opts.slots > 0 ? opts.slots : env().slots;
  g.mailboxBytes = opts.mailboxBytes >= 0 ? opts.mailboxBytes : env().mailboxBytes;
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
  GroupPlacement placement;
  plans_.algo = parseAlgoKnob(opts.algo.empty() ? env().algo : opts.algo);
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
  spinMicros_ = chooseSpin(localRanks, transport_->onlySharedMemory());
  ownCore_ = spinMicros_ >= kOwnCoreSpinMicros;
  if (env().cpuBind == "core") {
    // This rank's place among its machine's ranks of the group picks its CPU.
    bool bound = false;
    const std::string what =
        processCpuBinder().bindOnce(placement.machineIndex, localRanks, &bound);
    RING_LOG(bound ? kLogInfo : kLogWarn, what);
  }
  RING_LOG(kLogInfo, "a wait spins up to ", spinMicros_, " us before it sleeps (", localRanks,
           " rank(s) of this machine, ", usableCores(), " CPU(s)",
           env().spinMicros >= 0 ? "; TORCH_RING_SPIN_US" : "", ")");
  if (size > 1 && transport_->onlySharedMemory()) {
    directBytes_ = opts.directBytes >= 0 ? opts.directBytes : env().directBytes;
  }
  if (rank == 0) {
    RING_LOG(kLogInfo, size, " ranks, ring order 0 -> 1 -> ... -> ",
             size - 1, " -> 0; ", layout_.hosts(), " host(s); plans ",
             settingsLine(plans_, layout_));
  }
  // Which build of the host reductions this rank runs (ranks on other CPUs may run another:
  // the same bits, reduce_table.h); asked here, a TORCH_RING_CPU_ISA this CPU cannot serve
  // fails set-up rather than the first reduction.
  RING_LOG(kLogInfo, "host reductions: ", hostIsa() == HostIsa::Avx2 ? "avx2" : "baseline",
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

WaitContext Communicator::waitContext(const Fingerprint& fp, const CallInfo& c) {
  WaitContext ctx;
  ctx.start = Clock::now();
  ctx.timeout = c.timeout;
  ctx.deadline = ctx.start + c.timeout;
  ctx.spinMicros = spinMicros_;
  // By reference: the context lives only inside guarded(), whose caller holds `fp`; two
  // pointers fit std::function's inline buffer, so a call allocates nothing for its message.
  ctx.describe = [this, &fp] {
    return strCat(describe(fp), " on rank ", rank_, " of ", size_, " in group '", groupName_, "'");
  };
  Transport* t = transport_.get();
  // A rank that waits here on a peer that has gone on into a mailbox round (it ran this call
  // otherwise) would wait for a message that never comes, and so would the peer: the peer's
  // posted head tells (Mailbox::checkNotPostedElse), and both ranks fail naming both calls.
  ctx.checkHealth = [t, &fp](int peer) {
    t->checkHealth(peer);
    if (Mailbox* box = t->mailbox()) box->checkNotPostedElse(peer, fp);
  };
  return ctx;
}

// Runs one collective; a communication failure breaks the group for every rank (the state of
// the FIFOs is no longer in step), a usage error leaves it usable.
template <typename Body>
void Communicator::guarded(const Fingerprint& fp, const CallInfo& c, Body&& body) {
  RING_ASSERT(posted_.seq == PostedAhead::kNothing, describe(fp),
              " runs while the post of collective ", posted_.seq,
              " made ahead of its call waits for that call");
  transport_->checkHealth(-1);
  WaitContext ctx = waitContext(fp, c);
  try {
    body(ctx);
  } catch (const CommError& e) {
    transport_->markBroken(e.what());
    throw;
  }
}

namespace {

PlanBuffers buffers(const void* in, void* out, DType t, RedOp op, int size) {
  PlanBuffers io;
  io.input = static_cast<const char*>(in);
  io.output = static_cast<char*>(out);
  io.elemSize = elementSize(t);
  io.combine = combineFn(t, op);
  io.divide = op == RedOp::Avg ? divideFn(t) : nullptr;
  io.divisor = size;
  return io;
}

}  // namespace

AllReduceChoice Communicator::allReduceChoice(int64_t bytes) const {
  if (goesDirect(bytes)) {
    AllReduceChoice direct;
    direct.algorithm = Algorithm::Direct;
    return direct;
  }
  return chooseAllReducePlan(plans_, layout_, bytes);
}

Mailbox* Communicator::roundMailbox(Algorithm a, int64_t bytes) const {
  if (size_ == 1 || a != Algorithm::Direct) return nullptr;
  return directRoundMailbox(*transport_, bytes);
}

template <typename Prepare>
void Communicator::postAhead(Mailbox& box, const void* data, int64_t bytes,
                             const Fingerprint& fp, const CallInfo& c, Prepare&& prepare) {
  transport_->checkHealth(kHealthBetweenCalls);
  prepare();
  box.post(data, bytes, fp);
  posted_.seq = c.seq;
  posted_.fp = fp;
  posted_.box = &box;
}

const Communicator::PostedAhead* Communicator::takePosted(const CallInfo& c) {
  if (posted_.seq == PostedAhead::kNothing) return nullptr;
  RING_ASSERT(posted_.seq == c.seq, "collective ", c.seq, " runs while the post of collective ",
              posted_.seq, " made ahead of its call waits for that call");
  posted_.seq = PostedAhead::kNothing;
  return &posted_;
}

void Communicator::allReduce(void* data, int64_t count, DType t, RedOp op, double factor,
                             const CallInfo& c) {
  if (const PostedAhead* posted = takePosted(c)) {
    const Fingerprint fp = posted->fp;
    Mailbox& box = *posted->box;
    guarded(fp, c, [&](const WaitContext& ctx) {
      mailboxAllReduce(box, rank_, size_, static_cast<char*>(data), count,
                       buffers(data, data, t, op, size_), fp, ctx, MailboxPost::AlreadyDone);
    });
    return;
  }
  Fingerprint fp = makeFingerprint(Collective::AllReduce, c.seq, count, t, op, -1);
  const int64_t bytes = count * static_cast<int64_t>(elementSize(t));
  AllReduceChoice choice = allReduceChoice(bytes);
  fp.algorithm = choice.algorithm;
  if (c.postOnly) {
    Mailbox* box = roundMailbox(fp.algorithm, bytes);
    if (box == nullptr) return;
    // What the call below does before its round (mailboxAllReduce posts its input).
    postAhead(*box, data, bytes, fp, c, [&] {
      if (op == RedOp::PreMulSum) scaleFn(t)(data, data, factor, count);
    });
    return;
  }
  guarded(fp, c, [&](const WaitContext& ctx) {
    // PREMUL_SUM scales this rank's contribution in place (all-reduce is in place anyway).
    if (op == RedOp::PreMulSum) scaleFn(t)(data, data, factor, count);
    if (size_ == 1) {
      if (op == RedOp::Avg) divideFn(t)(data, 1, count);
      return;
    }
    if (fp.algorithm == Algorithm::Direct) {
      directAllReduce(*transport_, data, count, buffers(data, data, t, op, size_), fp, ctx);
      return;
    }
    if (fp.algorithm == Algorithm::HierRing || fp.algorithm == Algorithm::HierRd ||
        fp.algorithm == Algorithm::HierRadix || fp.algorithm == Algorithm::HierDirect) {
      if (segmentsCount_ != count) {
        segments_ = hostSegments(layout_, count);
        segmentsCount_ = count;
      }
      hierAllReduce(*transport_, layout_, segments_, static_cast<char*>(data), count,
                    sliceElems(slotBytes_, t), buffers(data, data, t, op, size_),
                    interHostPlan(std::move(choice)), fp, ctx);
      return;
    }
    auto steps = planAllReduce(size_, rank_, count, sliceElems(slotBytes_, t));
    runRingPlan(*transport_, steps, buffers(data, data, t, op, size_), fp, ctx);
  });
}

void Communicator::releaseLargeStaging() {
  if (staging_.capacity() > kKeptStagingBytes) std::vector<char>().swap(staging_);
}

Algorithm Communicator::reduceScatterPlan(int64_t partBytes) const {
  return chooseReduceScatter(plans_, layout_, partBytes);
}

Algorithm Communicator::allGatherPlan(int64_t partBytes) const {
  if (goesDirect(partBytes)) return Algorithm::Direct;
  return chooseAllGather(plans_, layout_, partBytes);
}

Algorithm Communicator::broadcastPlan() const { return chooseBroadcast(plans_, layout_); }

void Communicator::reduceScatter(const void* input, void* output, int64_t countPerRank, DType t,
                                 RedOp op, double factor, const CallInfo& c) {
  Fingerprint fp = makeFingerprint(Collective::ReduceScatter, c.seq, countPerRank, t, op, -1);
  fp.algorithm = reduceScatterPlan(countPerRank * static_cast<int64_t>(elementSize(t)));
  guarded(fp, c, [&](const WaitContext& ctx) {
    std::vector<char> scaled;
    const void* in = input;
    if (op == RedOp::PreMulSum) {
      // The caller's input must stay untouched, so the scaled contribution lives in a copy.
      scaled.resize(static_cast<size_t>(countPerRank * size_) * elementSize(t));
      scaleFn(t)(scaled.data(), input, factor, countPerRank * size_);
      in = scaled.data();
    }
    if (fp.algorithm == Algorithm::HierRing || fp.algorithm == Algorithm::HierDirect) {
      hierReduceScatter(*transport_, layout_, countPerRank, sliceElems(slotBytes_, t),
                        fp.algorithm == Algorithm::HierDirect, buffers(in, output, t, op, size_),
                        &staging_, fp, ctx);
      releaseLargeStaging();
      return;
    }
    auto steps = planReduceScatter(size_, rank_, countPerRank, sliceElems(slotBytes_, t));
    runRingPlan(*transport_, steps, buffers(in, output, t, op, size_), fp, ctx);
    if (size_ == 1 && op == RedOp::Avg) divideFn(t)(output, 1, countPerRank);
  });
}

void Communicator::allGather(const void* input, void* output, int64_t countPerRank, DType t,
                             const CallInfo& c) {
  if (const PostedAhead* posted = takePosted(c)) {
    const Fingerprint fp = posted->fp;
    Mailbox& box = *posted->box;
    guarded(fp, c, [&](const WaitContext& ctx) {
      mailboxAllGather(box, rank_, size_, input, output, countPerRank, elementSize(t), fp, ctx,
                       MailboxPost::AlreadyDone);
    });
    return;
  }
  Fingerprint fp = makeFingerprint(Collective::AllGather, c.seq, countPerRank, t, RedOp::Sum, -1);
  const int64_t partBytes = countPerRank * static_cast<int64_t>(elementSize(t));
  fp.algorithm = allGatherPlan(partBytes);
  if (c.postOnly) {
    if (Mailbox* box = roundMailbox(fp.algorithm, partBytes)) {
      postAhead(*box, input, partBytes, fp, c, [] {});
    }
    return;
  }
  guarded(fp, c, [&](const WaitContext& ctx) {
    if (fp.algorithm == Algorithm::Direct) {
      directAllGather(*transport_, input, output, countPerRank, elementSize(t), fp, ctx);
      return;
    }
    if (fp.algorithm == Algorithm::HierRing || fp.algorithm == Algorithm::HierDirect) {
      hierAllGather(*transport_, layout_, input, output, countPerRank, elementSize(t),
                    sliceElems(slotBytes_, t), fp.algorithm == Algorithm::HierDirect, &staging_,
                    fp, ctx);
      releaseLargeStaging();
      return;
    }
    auto steps = planAllGather(size_, rank_, countPerRank, sliceElems(slotBytes_, t));
    PlanBuffers io{static_cast<const char*>(input), static_cast<char*>(output), elementSize(t),
                   nullptr, nullptr, 1};
    runRingPlan(*transport_, steps, io, fp, ctx);
  });
}

void Communicator::broadcast(void* data, int64_t count, DType t, int root, const CallInfo& c) {
  Fingerprint fp = makeFingerprint(Collective::Broadcast, c.seq, count, t, RedOp::Sum, root);
  fp.algorithm = broadcastPlan();
  guarded(fp, c, [&](const WaitContext& ctx) {
    PlanBuffers io{static_cast<const char*>(data), static_cast<char*>(data), elementSize(t),
                   nullptr, nullptr, 1};
    if (fp.algorithm == Algorithm::HierRing) {
      runRingPlanAmong(*transport_, hostRing_, hostRingPos_[static_cast<size_t>(rank_)],
                       planBroadcast(size_, hostRingPos_[static_cast<size_t>(rank_)],
                                     hostRingPos_[static_cast<size_t>(root)], count,
                                     sliceElems(slotBytes_, t)),
                       io, fp, ctx);
      return;
    }
    auto steps = planBroadcast(size_, rank_, root, count, sliceElems(slotBytes_, t));
    runRingPlan(*transport_, steps, io, fp, ctx);
  });
}

void Communicator::reduce(const void* input, void* output, int64_t count, DType t, RedOp op,
                          double factor, int root, const CallInfo& c) {
  Fingerprint fp = makeFingerprint(Collective::Reduce, c.seq, count, t, op, root);
  guarded(fp, c, [&](const WaitContext& ctx) {
    std::vector<char> scaled;
    const void* in = input;
    if (op == RedOp::PreMulSum) {
      scaled.resize(static_cast<size_t>(count) * elementSize(t));
      scaleFn(t)(scaled.data(), input, factor, count);
      in = scaled.data();
    }
    auto steps = planReduce(size_, rank_, root, count, sliceElems(slotBytes_, t));
    runRingPlan(*transport_, steps, buffers(in, output, t, op, size_), fp, ctx);
    if (size_ == 1 && op == RedOp::Avg) divideFn(t)(output, 1, count);
  });
}

// Gather and scatter go directly between each rank and the root over the pairwise links: on
// shared memory every link is equally close, and a relay around the ring would move the
// blocks n/2 times more.
void Communicator::gather(const void* input, void* output, int64_t countPerRank, DType t,
                          int root, const CallInfo& c) {
  Fingerprint fp = makeFingerprint(Collective::Gather, c.seq, countPerRank, t, RedOp::Sum, root);
  guarded(fp, c, [&](const WaitContext& ctx) {
    const int64_t bytes = countPerRank * static_cast<int64_t>(elementSize(t));
    if (rank_ != root) {
      sendBytes(transport_->sendLink(Channel::Collective, root), rank_, input, bytes, fp, ctx);
      return;
    }
    char* out = static_cast<char*>(output);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) {
        if (out + r * bytes != input && bytes > 0) std::memmove(out + r * bytes, input, bytes);
        continue;
      }
      recvBytes(transport_->recvLink(Channel::Collective, r), rank_, out + r * bytes, bytes, fp,
                ctx);
    }
  });
}

void Communicator::scatter(const void* input, void* output, int64_t countPerRank, DType t,
                           int root, const CallInfo& c) {
  Fingerprint fp = makeFingerprint(Collective::Scatter, c.seq, countPerRank, t, RedOp::Sum, root);
  guarded(fp, c, [&](const WaitContext& ctx) {
    const int64_t bytes = countPerRank * static_cast<int64_t>(elementSize(t));
    if (rank_ != root) {
      recvBytes(transport_->recvLink(Channel::Collective, root), rank_, output, bytes, fp, ctx);
      return;
    }
    const char* in = static_cast<const char*>(input);
    // Start with the next rank so that the ranks are served in ring order from the root.
    for (int k = 1; k < size_; ++k) {
      int r = (rank_ + k) % size_;
      sendBytes(transport_->sendLink(Channel::Collective, r), rank_, in + r * bytes, bytes, fp,
                ctx);
    }
    if (in + rank_ * bytes != output && bytes > 0) std::memmove(output, in + rank_ * bytes, bytes);
  });
}

// Pairwise exchange: in round k every rank sends to rank+k and receives from rank-k, so each
// round is a permutation and no link is shared. Within a round, sends and receives alternate
// slice by slice; with two or more slots per FIFO this cannot deadlock.
void Communicator::allToAll(const void* input, void* output,
                            const std::vector<int64_t>& sendCounts,
                            const std::vector<int64_t>& sendOffsets,
                            const std::vector<int64_t>& recvCounts,
                            const std::vector<int64_t>& recvOffsets, DType t, const CallInfo& c) {
  const int64_t esize = static_cast<int64_t>(elementSize(t));
  Fingerprint fp = makeFingerprint(Collective::AllToAll, c.seq, 0, t, RedOp::Sum, -1);
  guarded(fp, c, [&](const WaitContext& ctx) {
    const char* in = static_cast<const char*>(input);
    char* out = static_cast<char*>(output);
    if (recvCounts[rank_] > 0 && out + recvOffsets[rank_] != in + sendOffsets[rank_]) {
      std::memmove(out + recvOffsets[rank_], in + sendOffsets[rank_], recvCounts[rank_]);
    }
    for (int k = 1; k < size_; ++k) {
      const int to = (rank_ + k) % size_;
      const int from = (rank_ - k + size_) % size_;
      SendLink& sl = transport_->sendLink(Channel::Collective, to);
      RecvLink& rl = transport_->recvLink(Channel::Collective, from);
      // Per-pair fingerprints carry the element count of that pair, so that uneven splits
      // that the two sides disagree on are caught.
      Fingerprint sfp = fp, rfp = fp;
      sfp.count = sendCounts[to] / esize;
      rfp.count = recvCounts[from] / esize;
      const int64_t cap = sl.capacity();
      int64_t sent = 0, got = 0, sendStep = 0, recvStep = 0;
      bool sendDone = false, recvDone = false;
      while (!sendDone || !recvDone) {
        if (!sendDone) {
          int64_t chunk = std::min(cap, sendCounts[to] - sent);
          OutSlot o = sl.acquire(ctx);
          if (chunk > 0) std::memcpy(o.payload, in + sendOffsets[to] + sent, chunk);
          fillHeader(o.header, rank_, sendStep++, chunk, sfp);
          sl.publish();
          sent += chunk;
          sendDone = sent >= sendCounts[to];
        }
        if (!recvDone) {
          InSlot i = rl.receive(ctx);
          int64_t left = recvCounts[from] - got;
          int64_t chunk = std::min(cap, left);
          verifyHeader(*i.header, rank_, from, recvStep++, chunk, rfp);
          if (chunk > 0) std::memcpy(out + recvOffsets[from] + got, i.payload, chunk);
          rl.release();
          got += chunk;
          recvDone = got >= recvCounts[from];
        }
      }
    }
  });
}

// A zero-length all-reduce: every rank's last receive depends on every rank having sent, so
// nobody leaves before everybody has arrived. Its messages carry the barrier's fingerprint.
void Communicator::barrier(const CallInfo& c) {
  Fingerprint fp = makeFingerprint(Collective::Barrier, c.seq, 0, DType::UInt8, RedOp::Sum, -1);
  Mailbox* box = size_ == 1 ? nullptr : transport_->mailbox();
  if (c.postOnly) {
    if (box != nullptr) postAhead(*box, nullptr, 0, fp, c, [] {});
    return;
  }
  const bool posted = takePosted(c) != nullptr;
  guarded(fp, c, [&](const WaitContext& ctx) {
    if (size_ == 1) return;
    // Where there are mailboxes: one round of empty messages, every rank waiting for each
    // other rank's post once.
    if (box != nullptr) {
      mailboxBarrier(*box, rank_, size_, fp, ctx,
                     posted ? MailboxPost::AlreadyDone : MailboxPost::Now);
      return;
    }
    auto steps = planAllReduce(size_, rank_, 0, 1);
    char dummy = 0;
    runRingPlan(*transport_, steps, buffers(&dummy, &dummy, DType::UInt8, RedOp::Sum, size_), fp,
                ctx);
  });
}

}  // namespace ring
