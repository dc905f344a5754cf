#include "executor/cpu_executor.h"

#include <cstring>

#include "common/errors.h"
#include "transport/stamped_link.h"

namespace ring {

// Each step touches each byte at most twice after it arrives: slot -> (reduce with local) ->
// output and/or the next slot. Reducing straight into the outgoing slot (recvReduceSend)
// avoids writing intermediate partial sums to the user's buffer.
namespace {

// One rank's part of a ring: `next` and `prev` are null for a ring of one.
void runSteps(StampedSender* next, CheckedReceiver* prev, const std::vector<Step>& steps,
              const PlanBuffers& io, const WaitContext& ctx) {
  for (const Step& s : steps) {
    const int64_t bytes = s.count * static_cast<int64_t>(io.elemSize);
    const char* src = io.input + s.src * static_cast<int64_t>(io.elemSize);
    char* dst = io.output + s.dst * static_cast<int64_t>(io.elemSize);
    RING_ASSERT(bytes <= (next ? next->capacity() : bytes), "slice of ", bytes, " bytes");

    InSlot in{nullptr, nullptr};
    if (primReceives(s.prim)) in.payload = prev->receive(ctx, bytes);
    OutSlot out{nullptr, nullptr};
    if (primSends(s.prim)) out.payload = next->acquire(ctx);

    switch (s.prim) {
      case Prim::Send:
        next->copyIn(out.payload, src, bytes);
        break;
      case Prim::RecvReduceSend:
        io.combine(out.payload, in.payload, src, s.count);
        break;
      case Prim::RecvReduceCopySend:
        io.combine(dst, in.payload, src, s.count);
        if (io.divide) io.divide(dst, io.divisor, s.count);
        next->copyIn(out.payload, dst, bytes);
        break;
      case Prim::RecvReduceCopy:
        io.combine(dst, in.payload, src, s.count);
        if (io.divide) io.divide(dst, io.divisor, s.count);
        break;
      case Prim::RecvCopySend:
        if (bytes > 0) {
          std::memcpy(dst, in.payload, static_cast<size_t>(bytes));
          next->copyIn(out.payload, in.payload, bytes);
        }
        break;
      case Prim::Recv:
        if (bytes > 0) std::memcpy(dst, in.payload, static_cast<size_t>(bytes));
        break;
      case Prim::Copy:
        // An all-gather input may be a view into its own output (FSDP): nothing to move then.
        if (src != dst && bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
        break;
    }
    if (out.payload != nullptr) next->publish(bytes);
    if (in.payload != nullptr) prev->release();
  }
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
  runSteps(&next, &prev, steps, io, ctx);
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
    void* slot = out.acquire(ctx);
    out.copyIn(slot, p + offset, chunk);
    out.publish(chunk);
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
