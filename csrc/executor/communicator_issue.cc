// What a call does before and around its run: its announcement (Communicator::announceIssued),
// its plan, chosen once (prepare), its message posted ahead where it is one mailbox round
// (post), the question whether every peer has issued it (allIssued), and the one dispatch
// of a prepared call to its collective (run): what the backend's runner does with a call
// (backend/work_queue.h).
#include <thread>

#include "common/errors.h"
#include "executor/communicator.h"
#include "protocol/message_header.h"
#include "reduce/reduce_table.h"
#include "transport/wait.h"

namespace ring {

void Communicator::announceIssued(uint64_t count) {
  if (!transport_->announces()) return;
  transport_->announceIssued(count);
  issues_.collect(*transport_, count);
}

template <typename Done>
bool Communicator::pollFor(std::chrono::microseconds patience, Done&& done) {
  const auto until = Clock::now() + patience;
  // Where every rank of the host has a core (the long spin, chooseSpin), pause between looks, read
  // the clock every 64, and never yield, as waitUntil does: a yield is a system call
  // (docs/notes/code_comment_figures.md, "The issue poll"), and a peer's announcement that lands
  // during one is seen that much later, on every call of a program that calls in a loop; and beside
  // busy processes a yield gives one of them the core for a whole slice
  // (WaitContext::yieldWhileSpinning). Where ranks share cores, yield at every look: the rank we
  // wait for may need this core to issue its call.
  for (int i = 1; !done(); ++i) {
    if (ownCore_ && i % 64 != 0) {
      cpuRelax();
      continue;
    }
    if (Clock::now() >= until) return false;
    if (!ownCore_) std::this_thread::yield();
  }
  return true;
}

bool Communicator::allIssued(uint64_t count, std::chrono::microseconds patience,
                             const PreparedCall* posted) {
  if (!transport_->announces()) return false;
  // Where this rank has posted the call's message ahead of it (post), the peers' messages of
  // the same round tell: each posts after it announces, and they are what the call reads
  // next, so waiting for them here is the call's one exchange between the cores (waiting for
  // the announcements, then for the messages, took two in a row). A peer that has issued the
  // call but not posted it (its thread is still in an earlier call) counts too, once the
  // patience is over.
  if (posted != nullptr && posted->posted && posted->seq + 1 == count) {
    Mailbox* box = posted->box;
    const auto allPosted = [&] {
      for (int k = 1; k < size_; ++k) {
        if (!box->arrived((rank_ + k) % size_)) return false;
      }
      return true;
    };
    return pollFor(patience, allPosted) || transport_->allIssued(count);
  }
  return pollFor(patience, [&] { return transport_->allIssued(count); });
}

PreparedCall Communicator::prepare(const CollectiveArgs& a, uint64_t seq) const {
  PreparedCall p;
  p.args = a;
  p.seq = seq;
  p.fp = makeFingerprint(a.kind, seq, a.count, a.dtype, a.op, a.root);
  const int64_t bytes = a.count * static_cast<int64_t>(elementSize(a.dtype));
  p.copy = copyChoice_.next(bytes);
  switch (a.kind) {
    case Collective::AllReduce:
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::Broadcast:
      // The algorithm goes into the fingerprint: ranks that chose differently fail naming both.
      p.plan = planOf(a.kind, bytes);
      p.fp.algorithm = p.plan.algorithm;
      break;
    case Collective::Barrier:
      // A barrier's messages carry the ring's algorithm (the fingerprint's default) whichever
      // path it takes; its args are the fixed ones of CollectiveArgs::barrier().
      RING_ASSERT(a == CollectiveArgs::barrier(), "a barrier (sequence ", seq,
                  ") described with a count, dtype, op or root");
      p.plan = planOf(Collective::Barrier, 0);
      break;
    case Collective::Reduce:
      break;  // one plan, the ring
    case Collective::Gather:
    case Collective::Scatter:
      // One plan: the root's own link to each rank (moving_collectives.cc).
      p.planName = "pairwise";
      return p;
    default:
      RING_ASSERT(false, "no prepared plan for ", collectiveName(a.kind), " (sequence ", seq, ")");
  }
  p.planName = callPlanName(a.kind, p.plan);
  // Only the collectives with a mailbox round take it (reduce_scatter, broadcast and reduce
  // have none, whatever their size).
  const bool hasMailboxRound = a.kind == Collective::AllReduce ||
                               a.kind == Collective::AllGather || a.kind == Collective::Barrier;
  p.box = hasMailboxRound && size_ > 1 ? mailboxOf(p.plan) : nullptr;
  return p;
}

bool Communicator::post(PreparedCall& p, const void* input, void* output) {
  if (p.box == nullptr) return false;  // no mailbox round: nothing to post ahead
  const CollectiveArgs& a = p.args;
  const void* message = nullptr;
  int64_t bytes = 0;
  switch (a.kind) {
    case Collective::AllReduce:
      message = output;  // in place
      bytes = a.count * static_cast<int64_t>(elementSize(a.dtype));
      break;
    case Collective::AllGather:
      message = input;
      bytes = a.count * static_cast<int64_t>(elementSize(a.dtype));
      break;
    case Collective::Barrier:
      break;
    default:
      return false;
  }
  // Nothing goes into a broken group: the peers waiting in that round would complete on it
  // (guarded() throws before a round's post for the same reason).
  transport_->checkHealth(kHealthBetweenCalls);
  // What the all_reduce does before its round: PREMUL_SUM scales this rank's contribution.
  if (a.kind == Collective::AllReduce && a.op == RedOp::PreMulSum) {
    scaleFn(a.dtype)(output, output, a.factor, a.count);
  }
  transport_->setStreamCopies(p.copy.streams);
  p.box->post(message, bytes, p.fp);
  p.posted = true;
  postedSeq_ = p.seq;
  return true;
}

void Communicator::run(const PreparedCall& p, const void* input, void* output,
                       const CallInfo& c) {
  CallInfo planned = c;
  planned.prepared = &p;
  transport_->setStreamCopies(p.copy.streams);
  // A trial of the copy choice is timed (copy_choice.h); a call that throws records nothing.
  const auto start = p.copy.trial ? Clock::now() : Clock::time_point{};
  dispatch(p, input, output, planned);
  if (p.copy.trial) {
    const double micros = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    copyChoice_.record(p.copy, p.args.count * static_cast<int64_t>(elementSize(p.args.dtype)),
                       micros);
  }
}

void Communicator::dispatch(const PreparedCall& p, const void* input, void* output,
                            const CallInfo& planned) {
  const CollectiveArgs& a = p.args;
  switch (a.kind) {
    case Collective::AllReduce:
      allReduce(output, a.count, a.dtype, a.op, a.factor, planned);
      return;
    case Collective::AllGather:
      allGather(input, output, a.count, a.dtype, planned);
      return;
    case Collective::ReduceScatter:
      reduceScatter(input, output, a.count, a.dtype, a.op, a.factor, planned);
      return;
    case Collective::Broadcast:
      broadcast(output, a.count, a.dtype, a.root, planned);
      return;
    case Collective::Reduce:
      reduce(input, output, a.count, a.dtype, a.op, a.factor, a.root, planned);
      return;
    case Collective::Gather:
      gather(input, output, a.count, a.dtype, a.root, planned);
      return;
    case Collective::Scatter:
      scatter(input, output, a.count, a.dtype, a.root, planned);
      return;
    case Collective::Barrier:
      barrier(planned);
      return;
    default:
      RING_ASSERT(false, "no prepared run for ", collectiveName(a.kind), " (sequence ", p.seq,
                  ")");
  }
}

}  // namespace ring
