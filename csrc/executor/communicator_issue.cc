// What a call does before and around its run: its announcement (Communicator::announceIssued),
// its plan and the function that runs it, chosen once (prepare), its message posted ahead where
// it is one mailbox round (post), the question whether every peer has issued it (allIssued),
// and its run: PREMUL_SUM's scaling, then the plan's function, inside the guard (run). What the
// backend's runner does with a call (backend/work_queue.h).
#include <algorithm>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "executor/communicator.h"
#include "executor/communicator_calls.h"
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

// Why one table: a call's collective and plan are chosen once (chooseCallPlan); which code
// runs them, and what they are expected to cost, are read here from one row, so that run()
// calls the function without asking again and the time estimator prices the plan the call
// would take. A row is (collective, algorithm, one mailbox round or not), its function and its
// price (call_estimate.h); a new plan is one row here and one function. A plan without a row
// is a fault of the choice, named here, not a wrong plan run.
struct Communicator::PlanRow {
  Collective collective;
  Algorithm algorithm;
  bool mailbox;
  PlanFunction function;
  PlanPrice price;
};

const Communicator::PlanRow& Communicator::planRow(Collective k, Algorithm a, bool mailbox) {
  using C = Collective;
  using A = Algorithm;
  using R = Communicator;
  namespace price = plan_prices;
  static constexpr PlanRow kRows[] = {
      {C::AllReduce, A::Direct, true, &R::allReduceMailbox, price::directRound},
      {C::AllReduce, A::Direct, false, &R::allReduceDirect, price::directRound},
      {C::AllReduce, A::Ring, false, &R::allReduceRing, price::flatAllReduce},
      {C::AllReduce, A::HierRing, false, &R::allReduceTwoLevels, price::twoLevelAllReduce},
      {C::AllReduce, A::HierRd, false, &R::allReduceTwoLevels, price::leadersRounds},
      {C::AllReduce, A::HierDirect, false, &R::allReduceTwoLevels, price::leadersDirectRound},
      {C::AllReduce, A::HierRadix, false, &R::allReduceTwoLevels, price::leadersRounds},
      {C::AllGather, A::Direct, true, &R::allGatherMailbox, price::directRound},
      {C::AllGather, A::Direct, false, &R::allGatherDirect, price::directRound},
      {C::AllGather, A::Ring, false, &R::allGatherRing, price::flatAllGather},
      {C::AllGather, A::HierRing, false, &R::allGatherTwoLevels, price::twoLevelAllGather},
      {C::AllGather, A::HierDirect, false, &R::allGatherTwoLevels, price::twoLevelAllGather},
      {C::ReduceScatter, A::Ring, false, &R::reduceScatterRing, price::flatAllGather},
      {C::ReduceScatter, A::HierRing, false, &R::reduceScatterTwoLevels,
       price::twoLevelAllGather},
      {C::ReduceScatter, A::HierDirect, false, &R::reduceScatterTwoLevels,
       price::twoLevelAllGather},
      // broadcast and reduce: priced as the flat chain whatever the plan.
      {C::Broadcast, A::Ring, false, &R::broadcastRing, price::flatAllGather},
      {C::Broadcast, A::HierRing, false, &R::broadcastHostChain, price::flatAllGather},
      {C::Reduce, A::Ring, false, &R::reduceRing, price::flatAllGather},
      {C::Gather, A::Ring, false, &R::gatherPairwise, price::pairwise},
      {C::Scatter, A::Ring, false, &R::scatterPairwise, price::pairwise},
      {C::Barrier, A::Ring, true, &R::barrierMailbox, price::emptyRound},
      {C::Barrier, A::Ring, false, &R::barrierRing, price::emptyRound},
  };
  for (const PlanRow& row : kRows) {
    if (row.collective == k && row.algorithm == a && row.mailbox == mailbox) return row;
  }
  RING_ASSERT(false, "the plan table has no row for ", collectiveName(k), " by ",
              algorithmRow(a).word, mailbox ? " in one mailbox round" : "");
  return kRows[0];  // not reached: RING_ASSERT throws
}

double Communicator::estimatedSeconds(Collective k, int64_t bytes) const {
  if (size_ <= 1) return kCallOverheadSeconds;
  const double b = static_cast<double>(std::max<int64_t>(bytes, 0));
  if (k == Collective::AllToAll) return kCallOverheadSeconds + allToAllSeconds(plans_, layout_, b);
  const CallPlan plan = chooseCallPlan(plans_, layout_, k, static_cast<int64_t>(b));
  const PlanRow& row = planRow(k, plan.algorithm, plan.mailboxRound);
  return kCallOverheadSeconds + row.price(PriceInputs{plans_, layout_, plan, b});
}

PreparedCall Communicator::prepare(const CollectiveArgs& a, uint64_t seq) const {
  // What the factories of CollectiveArgs guarantee, asked once here: every plan relies on it
  // (the one-rank case takes no link, so nothing later would name a bad root or count).
  const bool reduces = a.kind == Collective::AllReduce || a.kind == Collective::ReduceScatter ||
                       a.kind == Collective::Reduce;
  const bool rooted = a.kind == Collective::Broadcast || a.kind == Collective::Reduce ||
                      a.kind == Collective::Gather || a.kind == Collective::Scatter;
  RING_ASSERT(a.count >= 0 && (reduces || a.op == RedOp::Sum) &&
                  (!rooted || (a.root >= 0 && a.root < size_)),
              collectiveName(a.kind), " (sequence ", seq, ") described with ", a.count,
              " elements, op ", redOpName(a.op), ", root ", a.root, " in a group of ", size_);
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
      break;  // one plan: the root's own link to each rank (moving_collectives.cc)
    default:
      RING_ASSERT(false, "no prepared plan for ", collectiveName(a.kind), " (sequence ", seq, ")");
  }
  const bool pairwise = a.kind == Collective::Gather || a.kind == Collective::Scatter;
  p.planName = pairwise ? "pairwise" : callPlanName(a.kind, p.plan);
  // Only the collectives with a mailbox round take it (reduce_scatter, broadcast and reduce
  // have none, whatever their size).
  const bool hasMailboxRound = a.kind == Collective::AllReduce ||
                               a.kind == Collective::AllGather || a.kind == Collective::Barrier;
  p.box = hasMailboxRound && size_ > 1 ? mailboxOf(p.plan) : nullptr;
  // One rank runs every collective as its own copy; else the table's row for the plan.
  p.function = size_ == 1 ? &Communicator::oneRank
                          : planRow(a.kind, p.plan.algorithm, p.box != nullptr).function;
  return p;
}

const void* Communicator::premultiplied(const PreparedCall& p, const void* input, void* output,
                                        std::vector<char>* scaled) const {
  const CollectiveArgs& a = p.args;
  if (a.op != RedOp::PreMulSum) return input;
  if (a.kind == Collective::AllReduce) {
    if (!p.posted) scaleFn(a.dtype)(output, output, a.factor, a.count);
    return input;
  }
  const int64_t count = a.kind == Collective::ReduceScatter ? a.count * size_ : a.count;
  scaled->resize(static_cast<size_t>(count) * elementSize(a.dtype));
  scaleFn(a.dtype)(scaled->data(), input, a.factor, count);
  return scaled->data();
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
  // What the all_reduce does before its round, done now: PREMUL_SUM scales this rank's
  // contribution (in place; run() then leaves it, the call being posted).
  premultiplied(p, input, output, nullptr);
  transport_->setStreamCopies(p.copy.streams);
  p.box->post(message, bytes, p.fp);
  p.posted = true;
  postedSeq_ = p.seq;
  return true;
}

void Communicator::run(const PreparedCall& p, const void* input, void* output,
                       const CallInfo& c) {
  RING_ASSERT(p.function != nullptr && p.seq == c.seq, collectiveName(p.args.kind),
              " (sequence ", c.seq, ") run with ",
              p.function == nullptr ? std::string("a call that Communicator::prepare did not plan")
                                    : strCat("the plan prepared for sequence ", p.seq));
  CallInfo planned = c;
  planned.prepared = &p;
  transport_->setStreamCopies(p.copy.streams);
  // A trial of the copy choice is timed (copy_choice.h); a call that throws records nothing.
  const auto start = p.copy.trial ? Clock::now() : Clock::time_point{};
  guarded(p.fp, p.planName, planned, [&](const WaitContext& ctx) {
    std::vector<char> scaled;
    const void* in = premultiplied(p, input, output, &scaled);
    (this->*p.function)(p, in, output, ctx);
  });
  if (p.copy.trial) {
    const double micros = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    copyChoice_.record(p.copy, p.args.count * static_cast<int64_t>(elementSize(p.args.dtype)),
                       micros);
  }
}

void Communicator::run(const CollectiveArgs& args, const void* input, void* output,
                       const CallInfo& c) {
  if (c.prepared == nullptr) {
    const PreparedCall p = prepare(args, c.seq);
    run(p, input, output, c);
    return;
  }
  const PreparedCall& p = *c.prepared;
  RING_ASSERT(p.seq == c.seq && p.args == args, collectiveName(args.kind), " (sequence ",
              c.seq, ") runs with the plan prepared for ", collectiveName(p.args.kind),
              " (sequence ", p.seq, ", ", p.args.count, " elements; this call ", args.count, ")");
  run(p, input, output, c);
}

}  // namespace ring
