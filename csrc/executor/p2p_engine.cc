#include "executor/p2p_engine.h"

#include <cstring>
#include <thread>

#include "common/errors.h"
#include "common/thread_name.h"
#include "executor/cpu_executor.h"

namespace ring {

P2PEngine::P2PEngine(Transport& transport, std::string groupName, int spinMicros)
    : transport_(transport),
      groupName_(std::move(groupName)),
      spin_(spinMicros),
      sendSeq_(static_cast<size_t>(transport.size()), 0),
      receiver_(transport) {
  thread_ = std::thread([this] {
    nameThisThread("ring-p2p");
    run();
  });
}

P2PEngine::~P2PEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void P2PEngine::post(P2POp op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++open_;
    incoming_.push_back(std::move(op));
  }
  wake_.notify_all();
}

void P2PEngine::failAll(const std::string& reason) {
  std::deque<P2POp> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(incoming_);
  }
  for (auto& op : dropped) {
    op.done(std::make_exception_ptr(CommError(reason)), op.peer);
    ended();
  }
  // Operations already on the engine fail at their next health check (the transport is
  // aborted by the caller).
}

bool P2PEngine::blockedByEarlier(const Pending& p, const std::list<Pending>& before) const {
  // A send waits for the earlier sends to the same peer: messages on a link are not interleaved.
  for (const Pending& e : before) {
    if (&e == &p) return false;
    if (e.op.isSend && p.op.isSend && e.op.peer == p.op.peer) return true;
  }
  return false;
}

bool P2PEngine::progressSend(Pending& p) {
  const int me = transport_.rank();
  SendLink& link = transport_.sendLink(Channel::PointToPoint, p.op.peer);
  const int64_t cap = link.capacity();
  const Fingerprint fp = pointToPointFingerprint(p.pairSeq, p.op.bytes, p.op.tag);
  bool moved = false;
  OutSlot out;
  while (p.moved < p.op.bytes || p.step == 0) {
    if (!link.tryAcquire(&out)) break;
    int64_t chunk = std::min(cap, p.op.bytes - p.moved);
    if (chunk > 0) {
      std::memcpy(out.payload, static_cast<const char*>(p.op.data) + p.moved,
                  static_cast<size_t>(chunk));
    }
    out.header->magic = kMessageMagic;
    out.header->sender = me;
    out.header->step = p.step++;
    out.header->payloadBytes = chunk;
    out.header->fingerprint = fp;
    link.publish();
    p.moved += chunk;
    moved = true;
  }
  return moved;
}

void P2PEngine::finish(Pending& p, std::exception_ptr error) {
  if (!p.op.isSend) receiver_.forget(&p.recv);
  p.op.done(error, p.op.isSend ? p.op.peer : p.recv.source);
  ended();
}

void P2PEngine::ended() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --open_;
  }
  idle_.notify_all();
}

void P2PEngine::waitIdle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return open_ == 0; });
}


bool P2PEngine::failPendingIfUnhealthy() {
  try {
    transport_.checkHealth(kHealthBetweenCalls);
    return false;
  } catch (...) {
    auto error = std::current_exception();
    for (auto& p : pending_) finish(p, error);
    pending_.clear();
    return true;
  }
}

// Why this shape: a blocking send/recv pair costs four thread hand-offs (caller -> engine ->
// caller, on both ranks), so how soon the engine notices an arrival decides the latency. Timed
// condition-variable sleeps (timer slack included) made a 4-byte round trip slower than gloo's,
// and polling nonstop made it an order of magnitude faster (docs/notes/code_comment_figures.md,
// "The point-to-point engine"). So the engine
// busy-polls for the collectives' spin budget after its last progress (none when this host's
// ranks outnumber its cores), then sleeps on the futex of the link that its oldest bound
// receive waits on, which the sender's publish wakes at once; with no such receive it sleeps
// on the condition variable that post() signals. A sleep lasts at most a short slice, so that
// an operation posted meanwhile (post() cannot wake a link futex) starts soon.
void P2PEngine::idle(Clock::duration idleFor) {
  if (idleFor < spin_) {
    std::this_thread::yield();
    return;
  }
  auto slice = idleFor < std::chrono::milliseconds(50) ? std::chrono::microseconds(200)
                                                       : std::chrono::microseconds(1000);
  bool sendPending = false;
  for (const Pending& p : pending_) sendPending |= p.op.isSend;
  // The link of the oldest receive that waits for a message (a message's arrival wakes it).
  int waitOn = receiver_.linkToWaitOn();
  if (sendPending) {
    // A send waits for its receiver to free slots, which no futex of ours announces: short
    // sleeps, so that a large send is not held back a whole slice per slot.
    waitOn = -1;
    slice = std::chrono::microseconds(50);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_ || !incoming_.empty()) return;
  }
  if (waitOn < 0) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, slice, [&] { return stop_ || !incoming_.empty(); });
    return;
  }
  WaitContext ctx;
  ctx.start = Clock::now();
  ctx.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(slice);
  ctx.deadline = ctx.start + slice;
  ctx.spinMicros = 0;
  ctx.describe = [] { return std::string("point-to-point engine idle wait"); };
  ctx.checkHealth = [this](int peer) { transport_.checkHealth(peer); };
  try {
    // Returns as soon as the next message is there; progress() then takes it (receive does not
    // consume: the slot is the same until release()).
    transport_.recvLink(Channel::PointToPoint, waitOn).receive(ctx);
  } catch (const TimeoutError&) {
    // Nothing in this slice: the engine looks at new posts and deadlines, then waits again.
  } catch (const CommError&) {
    // The whole group failed (abort, broken, a dead rank): every operation fails. Otherwise the
    // error is this link's own (its peer shut down in order and will never send): that receive
    // fails with it, rather than spinning here until its timeout.
    auto error = std::current_exception();
    if (failPendingIfUnhealthy()) return;
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (!it->op.isSend && (it->op.peer == waitOn || it->recv.source == waitOn)) {
        finish(*it, error);
        pending_.erase(it);
        break;
      }
    }
  }
}

void P2PEngine::run() {
  auto lastProgress = Clock::now();
  auto lastHealthCheck = lastProgress;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (pending_.empty()) {
        wake_.wait(lock, [&] { return stop_ || !incoming_.empty(); });
      }
      if (stop_) break;
      while (!incoming_.empty()) {
        P2POp op = std::move(incoming_.front());
        incoming_.pop_front();
        pending_.emplace_back();
        Pending& p = pending_.back();  // in place: the receiver keeps a pointer to p.recv
        p.start = Clock::now();
        if (op.isSend) {
          p.pairSeq = sendSeq_[op.peer]++;
        } else {
          p.recv.peer = op.peer;
          p.recv.tag = op.tag;
          p.recv.data = op.data;
          p.recv.bytes = op.bytes;
          receiver_.post(&p.recv);
        }
        p.op = std::move(op);
        lastProgress = Clock::now();
      }
    }
    bool anyMoved = false;
    try {
      anyMoved |= receiver_.progress();
    } catch (const CommError& e) {
      // A message that breaks the protocol, or a receive of the wrong size: the group is broken.
      transport_.markBroken(e.what());
      auto error = std::current_exception();
      for (auto& p : pending_) finish(p, error);
      pending_.clear();
      continue;
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      Pending& p = *it;
      std::exception_ptr error;
      bool complete = false;
      try {
        if (p.op.isSend && !blockedByEarlier(p, pending_)) {
          anyMoved |= progressSend(p);
          complete = p.step > 0 && p.moved >= p.op.bytes;
        } else if (!p.op.isSend) {
          complete = p.recv.done;
        }
        if (!complete) {
          auto now = Clock::now();
          if (now - p.start > p.op.timeout) {
            throw TimeoutError(strCat(
                "ring: ", p.op.isSend ? "send to" : "recv from",
                p.op.peer >= 0 ? " rank " : " any rank",
                p.op.peer >= 0 ? strCat(p.op.peer) : std::string(), " (", p.op.bytes,
                " bytes, tag ", p.op.tag, ") on rank ", transport_.rank(), " of group '",
                groupName_, "' timed out after ",
                std::chrono::duration_cast<std::chrono::milliseconds>(now - p.start).count(),
                " ms (the timeout is ", p.op.timeout.count(), " ms): the peer never posted the matching ",
                p.op.isSend ? "recv" : "send"));
          }
        }
      } catch (const CommError& e) {
        transport_.markBroken(e.what());
        error = std::current_exception();
      } catch (...) {
        error = std::current_exception();
      }
      if (complete || error) {
        finish(p, error);
        it = pending_.erase(it);
        anyMoved = true;
      } else {
        ++it;
      }
    }
    auto now = Clock::now();
    if (anyMoved) {
      lastProgress = now;
      continue;
    }
    // Nothing could move. Look at the group's health now and then, so that a dead peer or an
    // abort fails the pending operations even while no link wait notices it.
    if (now - lastHealthCheck > std::chrono::milliseconds(5)) {
      lastHealthCheck = now;
      if (failPendingIfUnhealthy()) continue;
    }
    if (!pending_.empty()) idle(now - lastProgress);
  }
  for (auto& p : pending_) {
    finish(p, std::make_exception_ptr(CommError("ring: the process group was shut down with "
                                                "this send/recv still pending")));
  }
  pending_.clear();
}

}  // namespace ring
