#include "executor/cpu_executor.h"

#include <cstring>

#include "common/errors.h"
#include "transport/stamped_link.h"

namespace ring {

// Each step touches each byte at most twice after it arrives: slot -> (reduce with local) ->
// output and/or the next slot. Reducing straight into the outgoing slot (recvReduceSend)
// avoids writing intermediate partial sums to the user's buffer.
//
// Single-copy messages (transport/link.h, SendLink::lendsFrom): where a step sends data that
// stays as it is until the call ends (the final values an all_reduce's last reducing step
// writes, everything an all_gather or broadcast moves), a link that lends sends only where the
// data lies, and the receiver copies it straight into its own buffer: one copy per hop instead
// of two. Data a reducing step will add in is always copied (it is read where it is summed, and a
// second process cannot sum in place). The plan, and so every bit, is the same either way: only
// who copies changes. Before the call returns, the sender waits until its receiver has read all
// it lent (waitLentRead): the caller may change its buffers afterwards.
namespace {

// Moves the data of a received message into `dst`: read from the sender where it was lent,
// copied out of the slot otherwise.
inline void takeInto(CheckedReceiver* prev, bool lent, const void* payload, char* dst,
                     int64_t bytes, const WaitContext& ctx) {
  if (lent) {
    prev->readLent(payload, dst, bytes, ctx);
  } else if (bytes > 0) {
    std::memcpy(dst, payload, static_cast<size_t>(bytes));
  }
}

// Sends `bytes` at `data` as a copy in the acquired slot.
inline void sendCopied(StampedSender* next, void* slot, const void* data, int64_t bytes) {
  next->copyIn(slot, data, bytes);
  next->publish(bytes);
}

// Sends `bytes` at `data`, whose value is final for this call: lent where the link lends that
// size, else copied into the acquired slot.
inline void sendFinal(StampedSender* next, void* slot, const char* data, int64_t bytes) {
  if (next->lends(bytes)) {
    next->publishLent(data, bytes);
  } else {
    sendCopied(next, slot, data, bytes);
  }
}

// One rank's part of a ring: `next` and `prev` are null for a ring of one.
void runSteps(StampedSender* next, CheckedReceiver* prev, const std::vector<Step>& steps,
              const PlanBuffers& io, const WaitContext& ctx) {
  // Without a reduction every message is final data (all_gather, broadcast, the copies of the
  // two-level plans); with one, only what the copying steps send.
  const bool sendsAreFinal = io.combine == nullptr;
  for (const Step& s : steps) {
    const int64_t bytes = s.count * static_cast<int64_t>(io.elemSize);
    const char* src = io.input + s.src * static_cast<int64_t>(io.elemSize);
    char* dst = io.output + s.dst * static_cast<int64_t>(io.elemSize);
    RING_ASSERT(bytes <= (next ? next->capacity() : bytes), "slice of ", bytes, " bytes");

    InSlot in{nullptr, nullptr};
    bool inLent = false;
    if (primReceives(s.prim)) {
      const bool copies = s.prim == Prim::Recv || s.prim == Prim::RecvCopySend;
      in.payload = prev->receiveMaybeLent(ctx, bytes, &inLent);
      if (inLent && !copies) prev->refuseLent(ctx, bytes);
    }
    OutSlot out{nullptr, nullptr};
    if (primSends(s.prim)) out.payload = next->acquire(ctx);

    switch (s.prim) {
      case Prim::Send:
        if (sendsAreFinal) {
          sendFinal(next, out.payload, src, bytes);
        } else {
          sendCopied(next, out.payload, src, bytes);
        }
        break;
      case Prim::RecvReduceSend:
        io.combine(out.payload, in.payload, src, s.count);
        next->publish(bytes);
        break;
      case Prim::RecvReduceCopySend:
        io.combine(dst, in.payload, src, s.count);
        if (io.divide) io.divide(dst, io.divisor, s.count);
        sendFinal(next, out.payload, dst, bytes);
        break;
      case Prim::RecvReduceCopy:
        io.combine(dst, in.payload, src, s.count);
        if (io.divide) io.divide(dst, io.divisor, s.count);
        break;
      case Prim::RecvCopySend:
        if (inLent || next->lends(bytes)) {
          // Into this rank's buffer first: what goes on is lent from there (or copied from it
          // while it is still in this core's cache).
          takeInto(prev, inLent, in.payload, dst, bytes, ctx);
          sendFinal(next, out.payload, dst, bytes);
        } else {
          if (bytes > 0) std::memcpy(dst, in.payload, static_cast<size_t>(bytes));
          sendCopied(next, out.payload, in.payload, bytes);
        }
        break;
      case Prim::Recv:
        takeInto(prev, inLent, in.payload, dst, bytes, ctx);
        break;
      case Prim::Copy:
        // An all-gather input may be a view into its own output (FSDP): nothing to move then.
        if (src != dst && bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
        break;
    }
    if (in.payload != nullptr) prev->release();
  }
  if (next != nullptr) next->waitLentRead(ctx);
}

// The ring of `n` ranks this rank is in: messages go to `nextRank` and come from `prevRank`.
void runRingOver(Transport& t, int n, int nextRank, int prevRank, const std::vector<Step>& steps,
                 const PlanBuffers& io, const Fingerprint& expected, const WaitContext& ctx) {
  if (n == 1) {
    runSteps(nullptr, nullptr, steps, io, ctx);
    return;
  }
  StampedSender next(t.sendLink(Channel::Collective, nextRank), t.rank(), expected);
  CheckedReceiver prev(t.recvLink(Channel::Collective, prevRank), t.rank(), expected);
  try {
    runSteps(&next, &prev, steps, io, ctx);
  } catch (...) {
    // A step that fails after lending returns the caller its buffers while the receiver may
    // still read them. Whatever the failure (not only a CommError, which marks the group broken
    // on its way up anyway), the group is broken first: a receiver checks that after each read
    // (ShmRecvLink::readLent) and raises instead of keeping bytes the caller may have changed.
    if (next.lentUnread()) {
      t.markBroken(strCat("rank ", t.rank(), " failed in a ring step while rank ", nextRank,
                          " could still read what it lent: ", messageOf(std::current_exception())));
    }
    throw;
  }
}

}  // namespace

void runRingPlan(Transport& t, const std::vector<Step>& steps, const PlanBuffers& io,
                 const Fingerprint& expected, const WaitContext& ctx) {
  const int me = t.rank();
  const int n = t.size();
  runRingOver(t, n, ringNext(me, n), ringPrev(me, n), steps, io, expected, ctx);
}

void runRingPlanAmong(Transport& t, const std::vector<int>& members, int pos,
                      const std::vector<Step>& steps, const PlanBuffers& io,
                      const Fingerprint& expected, const WaitContext& ctx) {
  const int n = static_cast<int>(members.size());
  RING_ASSERT(pos >= 0 && pos < n && members[static_cast<size_t>(pos)] == t.rank(), "rank ",
              t.rank(), " at position ", pos, " of a ring of ", n);
  runRingOver(t, n, members[static_cast<size_t>(ringNext(pos, n))],
              members[static_cast<size_t>(ringPrev(pos, n))], steps, io, expected, ctx);
}

void sendBytes(SendLink& link, int myRank, const void* data, int64_t bytes,
               const Fingerprint& fp, const WaitContext& ctx) {
  StampedSender out(link, myRank, fp);
  const int64_t cap = out.capacity();
  const char* p = static_cast<const char*>(data);
  int64_t offset = 0;
  do {
    int64_t chunk = bytes - offset < cap ? bytes - offset : cap;
    sendCopied(&out, out.acquire(ctx), p + offset, chunk);
    offset += chunk;
  } while (offset < bytes);
}

void recvBytes(RecvLink& link, int myRank, void* data, int64_t bytes, const Fingerprint& expected,
               const WaitContext& ctx) {
  CheckedReceiver in(link, myRank, expected);
  char* p = static_cast<char*>(data);
  int64_t offset = 0;
  do {
    // The sender cuts at its own capacity; we only require that the bytes fit what we expect.
    int64_t chunk = 0;
    const void* payload = in.receiveAtMost(ctx, bytes - offset, &chunk);
    if (chunk > 0) std::memcpy(p + offset, payload, static_cast<size_t>(chunk));
    in.release();
    offset += chunk;
    if (chunk == 0) break;  // an empty message ends a transfer (only sent for 0 bytes)
  } while (offset < bytes);
}

}  // namespace ring
