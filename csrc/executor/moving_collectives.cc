// The Communicator's plan functions of the collectives that move data without reducing it:
// all_gather, broadcast, gather, scatter (each runs the plan prepare chose for it: planRow,
// communicator_issue.cc, inside guarded()), and all_to_all, which has one plan and stamps its
// own fingerprint.
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

void Communicator::allGatherMailbox(const PreparedCall& p, const void* in, void* out,
                                    const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  // One round through the mailboxes; where it was posted ahead, the peers' parts remain.
  MailboxRound links(*p.box, rank_, size_, p.posted);
  directAllGather(links, in, out, a.count, elementSize(a.dtype), p.fp, ctx);
}

void Communicator::allGatherDirect(const PreparedCall& p, const void* in, void* out,
                                   const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  FifoRound links(*transport_, DirectMembers{nullptr, size_, rank_});
  directAllGather(links, in, out, a.count, elementSize(a.dtype), p.fp, ctx);
}

void Communicator::allGatherTwoLevels(const PreparedCall& p, const void* in, void* out,
                                      const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  hierAllGather(*transport_, layout_, in, out, a.count, elementSize(a.dtype),
                sliceElems(slotBytes_, a.dtype), p.fp.algorithm == Algorithm::HierDirect,
                &staging_, p.fp, ctx);
  releaseLargeStaging();
}

void Communicator::allGatherRing(const PreparedCall& p, const void* in, void* out,
                                 const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  auto steps = planAllGather(size_, rank_, a.count, sliceElems(slotBytes_, a.dtype));
  PlanBuffers io{static_cast<const char*>(in), static_cast<char*>(out), elementSize(a.dtype),
                 nullptr, nullptr, 1};
  runRingPlan(*transport_, steps, io, p.fp, ctx);
}

// The broadcasts run in place on `out`. Between hosts: a chain around the ring that visits the
// hosts one after the other (hostMajorRing), so the network is crossed at most once a host.
void Communicator::broadcastHostChain(const PreparedCall& p, const void*, void* out,
                                      const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  PlanBuffers io{static_cast<const char*>(out), static_cast<char*>(out), elementSize(a.dtype),
                 nullptr, nullptr, 1};
  const int pos = hostRingPos_[static_cast<size_t>(rank_)];
  runRingPlanAmong(*transport_, hostRing_, pos,
                   planBroadcast(size_, pos, hostRingPos_[static_cast<size_t>(a.root)], a.count,
                                 sliceElems(slotBytes_, a.dtype)),
                   io, p.fp, ctx);
}

void Communicator::broadcastRing(const PreparedCall& p, const void*, void* out,
                                 const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  PlanBuffers io{static_cast<const char*>(out), static_cast<char*>(out), elementSize(a.dtype),
                 nullptr, nullptr, 1};
  auto steps = planBroadcast(size_, rank_, a.root, a.count, sliceElems(slotBytes_, a.dtype));
  runRingPlan(*transport_, steps, io, p.fp, ctx);
}

// gather and scatter: the root's own link to each rank, one part each.
void Communicator::gatherPairwise(const PreparedCall& p, const void* input, void* output,
                                  const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  const int64_t bytes = a.count * static_cast<int64_t>(elementSize(a.dtype));
  if (rank_ != a.root) {
    sendBytes(transport_->sendLink(Channel::Collective, a.root), rank_, input, bytes, p.fp, ctx);
    return;
  }
  char* out = static_cast<char*>(output);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      if (out + r * bytes != input && bytes > 0) std::memmove(out + r * bytes, input, bytes);
      continue;
    }
    recvBytes(transport_->recvLink(Channel::Collective, r), rank_, out + r * bytes, bytes, p.fp,
              ctx);
  }
}

void Communicator::scatterPairwise(const PreparedCall& p, const void* input, void* output,
                                   const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  const int64_t bytes = a.count * static_cast<int64_t>(elementSize(a.dtype));
  if (rank_ != a.root) {
    recvBytes(transport_->recvLink(Channel::Collective, a.root), rank_, output, bytes, p.fp, ctx);
    return;
  }
  const char* in = static_cast<const char*>(input);
  // Start with the next rank so that the ranks are served in ring order from the root.
  for (int k = 1; k < size_; ++k) {
    int r = (rank_ + k) % size_;
    sendBytes(transport_->sendLink(Channel::Collective, r), rank_, in + r * bytes, bytes, p.fp,
              ctx);
  }
  if (in + rank_ * bytes != output && bytes > 0) std::memmove(output, in + rank_ * bytes, bytes);
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
