// The Communicator's collectives that move data without reducing it: all_gather, broadcast,
// gather, scatter, all_to_all. Each stamps its fingerprint, takes its plan from chooseCallPlan
// (plan_choice.h) where it has several, and runs it inside guarded() (communicator_calls.h).
#include "executor/communicator.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/errors.h"
#include "executor/communicator_calls.h"
#include "executor/direct_collectives.h"
#include "executor/hier_gather_scatter.h"
#include "schedule/ring_plan.h"
#include "transport/stamped_link.h"

namespace ring {

using namespace collective_parts;

void Communicator::allGather(const void* input, void* output, int64_t countPerRank, DType t,
                             const CallInfo& c) {
  PreparedCall local;
  const PreparedCall& p = preparedFor(c, CollectiveArgs::allGather(countPerRank, t), &local);
  const Fingerprint& fp = p.fp;
  guarded(fp, p.planName, c, [&](const WaitContext& ctx) {
    if (p.box != nullptr) {
      // One round through the mailboxes; where it was posted ahead, the peers' parts remain.
      MailboxRound links(*p.box, rank_, size_, p.posted);
      directAllGather(links, input, output, countPerRank, elementSize(t), fp, ctx);
      return;
    }
    if (fp.algorithm == Algorithm::Direct) {
      FifoRound links(*transport_, DirectMembers{nullptr, size_, rank_});
      directAllGather(links, input, output, countPerRank, elementSize(t), fp, ctx);
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
  PreparedCall local;
  const PreparedCall& p = preparedFor(c, CollectiveArgs::broadcast(count, t, root), &local);
  const Fingerprint& fp = p.fp;
  guarded(fp, p.planName, c, [&](const WaitContext& ctx) {
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

void Communicator::gather(const void* input, void* output, int64_t countPerRank, DType t,
                          int root, const CallInfo& c) {
  PreparedCall local;
  const PreparedCall& p = preparedFor(c, CollectiveArgs::gather(countPerRank, t, root), &local);
  const Fingerprint& fp = p.fp;
  guarded(fp, p.planName, c, [&](const WaitContext& ctx) {
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
  PreparedCall local;
  const PreparedCall& p = preparedFor(c, CollectiveArgs::scatter(countPerRank, t, root), &local);
  const Fingerprint& fp = p.fp;
  guarded(fp, p.planName, c, [&](const WaitContext& ctx) {
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

void Communicator::allToAll(const void* input, void* output,
                            const std::vector<int64_t>& sendCounts,
                            const std::vector<int64_t>& sendOffsets,
                            const std::vector<int64_t>& recvCounts,
                            const std::vector<int64_t>& recvOffsets, DType t, const CallInfo& c) {
  const int64_t esize = static_cast<int64_t>(elementSize(t));
  Fingerprint fp = makeFingerprint(Collective::AllToAll, c.seq, 0, t, RedOp::Sum, -1);
  guarded(fp, "pairwise", c, [&](const WaitContext& ctx) {
    const char* in = static_cast<const char*>(input);
    char* out = static_cast<char*>(output);
    if (recvCounts[rank_] > 0 && out + recvOffsets[rank_] != in + sendOffsets[rank_]) {
      std::memmove(out + recvOffsets[rank_], in + sendOffsets[rank_], recvCounts[rank_]);
    }
    for (int k = 1; k < size_; ++k) {
      const int to = (rank_ + k) % size_;
      const int from = (rank_ - k + size_) % size_;
      // Per-pair fingerprints carry the element count of that pair, so that uneven splits
      // that the two sides disagree on are caught.
      Fingerprint sfp = fp, rfp = fp;
      sfp.count = sendCounts[to] / esize;
      rfp.count = recvCounts[from] / esize;
      StampedSender sl(transport_->sendLink(Channel::Collective, to), rank_, sfp);
      CheckedReceiver rl(transport_->recvLink(Channel::Collective, from), rank_, rfp);
      const int64_t cap = sl.capacity();
      int64_t sent = 0, got = 0;
      bool sendDone = false, recvDone = false;
      while (!sendDone || !recvDone) {
        if (!sendDone) {
          int64_t chunk = std::min(cap, sendCounts[to] - sent);
          void* slot = sl.acquire(ctx);
          sl.copyIn(slot, in + sendOffsets[to] + sent, chunk);
          sl.publish(chunk);
          sent += chunk;
          sendDone = sent >= sendCounts[to];
        }
        if (!recvDone) {
          int64_t chunk = std::min(cap, recvCounts[from] - got);
          const void* payload = rl.receive(ctx, chunk);
          if (chunk > 0) std::memcpy(out + recvOffsets[from] + got, payload, chunk);
          rl.release();
          got += chunk;
          recvDone = got >= recvCounts[from];
        }
      }
    }
  });
}

}  // namespace ring
