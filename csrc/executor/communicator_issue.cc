// What a call does at issue, before it runs: its announcement (Communicator::announceIssued),
// its message posted ahead where it is one mailbox round (postAllReduce, postAllGather,
// postBarrier), and the question whether every peer has issued it (Communicator::allIssued):
// what the backend's runner does before it runs a small call on the caller's thread
// (backend/work_queue.h).
#include <thread>

#include "common/env.h"
#include "common/logging.h"
#include "executor/communicator.h"
#include "protocol/message_header.h"
#include "reduce/reduce_table.h"
#include "transport/wait.h"

namespace ring {

void Communicator::announceIssued(uint64_t count) {
  if (!transport_->announces()) return;
  transport_->announceIssued(count);
  // The transport keeps 64 issue times per rank: stay well inside them (a collective whose
  // entry was overwritten would never be read), skipping what fell behind.
  constexpr uint64_t kBehind = 32;
  if (count > kBehind && nextIssueToCollect_ + kBehind < count) {
    nextIssueToCollect_ = count - kBehind;
  }
  // In order, as far as every rank has issued (usually the previous collective: one read of
  // each rank's entry per call).
  while (nextIssueToCollect_ < count &&
         transport_->issueTimes(nextIssueToCollect_, &issueScratch_)) {
    stragglers_.add(issueScratch_);
    ++nextIssueToCollect_;
  }
  const int every = env().stragglerLogSeconds;
  if (every > 0 && rank_ == 0 &&
      std::chrono::steady_clock::now() - lastStragglerLog_ >= std::chrono::seconds(every)) {
    lastStragglerLog_ = std::chrono::steady_clock::now();
    RING_LOG(kLogInfo, "stragglers: ", stragglers_.report(1.0).describe());
  }
}

template <typename Done>
bool Communicator::pollFor(std::chrono::microseconds patience, Done&& done) {
  const auto until = Clock::now() + patience;
  // Where every rank of the host has a core (the long spin, chooseSpin), pause between looks,
  // read the clock every 64, and never yield, as waitUntil does: a yield is a system call
  // (about 0.3 us here), and a peer's announcement that lands during one is seen that much
  // later, on every call of a program that calls in a loop; and beside busy processes a yield
  // gives one of them the core for a whole slice (WaitContext::yieldWhileSpinning). Where ranks
  // share cores, yield at every look: the rank we wait for may need this core to issue its call.
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

bool Communicator::allIssued(uint64_t count, std::chrono::microseconds patience) {
  if (!transport_->announces()) return false;
  // Where this rank has posted the call's message ahead of it (postAllReduce ...), the
  // peers' messages of the same round tell: each posts after it announces, and they are what
  // the call reads next, so waiting for them here is the call's one exchange between the
  // cores (waiting for the announcements, then for the messages, took two in a row). A peer
  // that has issued the call but not posted it (its thread is still in an earlier call)
  // counts too, once the patience is over.
  Mailbox* box = posted_.seq + 1 == count ? posted_.box : nullptr;
  if (box != nullptr) {
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

template <typename Prepare>
void Communicator::postAhead(Mailbox& box, const void* data, int64_t bytes,
                             const Fingerprint& fp, const char* plan, const CallInfo& c,
                             Prepare&& prepare) {
  transport_->checkHealth(kHealthBetweenCalls);
  prepare();
  box.post(data, bytes, fp);
  posted_.seq = c.seq;
  posted_.fp = fp;
  posted_.box = &box;
  posted_.plan = plan;
}

const Communicator::PostedAhead* Communicator::takePosted(const CallInfo& c) {
  if (posted_.seq == PostedAhead::kNothing) return nullptr;
  RING_ASSERT(posted_.seq == c.seq, "collective ", c.seq, " runs while the post of collective ",
              posted_.seq, " made ahead of its call waits for that call");
  posted_.seq = PostedAhead::kNothing;
  return &posted_;
}

bool Communicator::postAllReduce(void* data, int64_t count, DType t, RedOp op, double factor,
                                 const CallInfo& c) {
  // Cheap first: a group without mailbox rounds would only choose the call's plan twice.
  if (size_ == 1 || transport_->mailbox() == nullptr) return false;
  Fingerprint fp = makeFingerprint(Collective::AllReduce, c.seq, count, t, op, -1);
  const int64_t bytes = count * static_cast<int64_t>(elementSize(t));
  const CallPlan plan = planOf(Collective::AllReduce, bytes);
  fp.algorithm = plan.algorithm;
  Mailbox* box = mailboxOf(plan);
  if (box == nullptr) return false;
  // What allReduce does before its round (mailboxAllReduce posts its input).
  postAhead(*box, data, bytes, fp, callPlanName(Collective::AllReduce, plan), c, [&] {
    if (op == RedOp::PreMulSum) scaleFn(t)(data, data, factor, count);
  });
  return true;
}

bool Communicator::postAllGather(const void* input, int64_t countPerRank, DType t,
                                 const CallInfo& c) {
  if (size_ == 1 || transport_->mailbox() == nullptr) return false;
  Fingerprint fp = makeFingerprint(Collective::AllGather, c.seq, countPerRank, t, RedOp::Sum, -1);
  const int64_t partBytes = countPerRank * static_cast<int64_t>(elementSize(t));
  const CallPlan plan = planOf(Collective::AllGather, partBytes);
  fp.algorithm = plan.algorithm;
  Mailbox* box = mailboxOf(plan);
  if (box == nullptr) return false;
  postAhead(*box, input, partBytes, fp, callPlanName(Collective::AllGather, plan), c, [] {});
  return true;
}

bool Communicator::postBarrier(const CallInfo& c) {
  const CallPlan plan = planOf(Collective::Barrier, 0);
  Mailbox* box = mailboxOf(plan);
  if (box == nullptr) return false;
  const Fingerprint fp =
      makeFingerprint(Collective::Barrier, c.seq, 0, DType::UInt8, RedOp::Sum, -1);
  postAhead(*box, nullptr, 0, fp, callPlanName(Collective::Barrier, plan), c, [] {});
  return true;
}

}  // namespace ring
