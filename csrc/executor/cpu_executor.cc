#include "executor/cpu_executor.h"

#include <cstring>

#include "common/errors.h"

namespace ring {

void fillHeader(MessageHeader* h, int myRank, int64_t step, int64_t bytes, const Fingerprint& fp) {
  *h = makeHeader(myRank, step, bytes, fp);
}

// Each step touches each byte at most twice after it arrives: slot -> (reduce with local) ->
// output and/or the next slot. Reducing straight into the outgoing slot (recvReduceSend)
// avoids writing intermediate partial sums to the user's buffer.
namespace {

// One rank's part of a ring: `next` and `prev` are null for a ring of one.
void runSteps(int me, SendLink* next, RecvLink* prev, int prevRank, const std::vector<Step>& steps,
              const PlanBuffers& io, const Fingerprint& expected, const WaitContext& ctx) {
  int64_t sent = 0, received = 0;

  for (const Step& s : steps) {
    const int64_t bytes = s.count * static_cast<int64_t>(io.elemSize);
    const char* src = io.input + s.src * static_cast<int64_t>(io.elemSize);
    char* dst = io.output + s.dst * static_cast<int64_t>(io.elemSize);
    RING_ASSERT(bytes <= (next ? next->capacity() : bytes), "slice of ", bytes, " bytes");

    InSlot in{nullptr, nullptr};
    if (primReceives(s.prim)) {
      in = prev->receive(ctx);
      // The header is read only after the acquire in receive(): it was written before publish.
      verifyHeader(*in.header, me, prevRank, received, bytes, expected);
    }
    OutSlot out{nullptr, nullptr};
    if (primSends(s.prim)) out = next->acquire(ctx);

    switch (s.prim) {
      case Prim::Send:
        if (bytes > 0) std::memcpy(out.payload, src, static_cast<size_t>(bytes));
        break;
      case Prim::RecvReduceSend:
        io.combine(out.payload, in.payload, src, s.count);
        break;
      case Prim::RecvReduceCopySend:
        io.combine(dst, in.payload, src, s.count);
        if (io.divide) io.divide(dst, io.divisor, s.count);
        if (bytes > 0) std::memcpy(out.payload, dst, static_cast<size_t>(bytes));
        break;
      case Prim::RecvReduceCopy:
        io.combine(dst, in.payload, src, s.count);
        if (io.divide) io.divide(dst, io.divisor, s.count);
        break;
      case Prim::RecvCopySend:
        if (bytes > 0) {
          std::memcpy(dst, in.payload, static_cast<size_t>(bytes));
          std::memcpy(out.payload, in.payload, static_cast<size_t>(bytes));
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
    if (out.payload != nullptr) {
      fillHeader(out.header, me, sent++, bytes, expected);
      next->publish();
    }
    if (in.payload != nullptr) {
      prev->release();
      ++received;
    }
  }
}

}  // namespace

void runRingPlan(Transport& t, const std::vector<Step>& steps, const PlanBuffers& io,
                 const Fingerprint& expected, const WaitContext& ctx) {
  const int me = t.rank();
  const int n = t.size();
  SendLink* next = n > 1 ? &t.sendLink(Channel::Collective, ringNext(me, n)) : nullptr;
  RecvLink* prev = n > 1 ? &t.recvLink(Channel::Collective, ringPrev(me, n)) : nullptr;
  runSteps(me, next, prev, ringPrev(me, n), steps, io, expected, ctx);
}

void runRingPlanAmong(Transport& t, const std::vector<int>& members, int pos,
                      const std::vector<Step>& steps, const PlanBuffers& io,
                      const Fingerprint& expected, const WaitContext& ctx) {
  const int n = static_cast<int>(members.size());
  RING_ASSERT(pos >= 0 && pos < n && members[static_cast<size_t>(pos)] == t.rank(), "rank ",
              t.rank(), " at position ", pos, " of a ring of ", n);
  const int nextRank = members[static_cast<size_t>(ringNext(pos, n))];
  const int prevRank = members[static_cast<size_t>(ringPrev(pos, n))];
  SendLink* next = n > 1 ? &t.sendLink(Channel::Collective, nextRank) : nullptr;
  RecvLink* prev = n > 1 ? &t.recvLink(Channel::Collective, prevRank) : nullptr;
  runSteps(t.rank(), next, prev, prevRank, steps, io, expected, ctx);
}

void sendBytes(SendLink& link, int myRank, const void* data, int64_t bytes,
               const Fingerprint& fp, const WaitContext& ctx) {
  const int64_t cap = link.capacity();
  const char* p = static_cast<const char*>(data);
  int64_t step = 0;
  int64_t offset = 0;
  do {
    int64_t chunk = bytes - offset < cap ? bytes - offset : cap;
    OutSlot out = link.acquire(ctx);
    if (chunk > 0) std::memcpy(out.payload, p + offset, static_cast<size_t>(chunk));
    fillHeader(out.header, myRank, step++, chunk, fp);
    link.publish();
    offset += chunk;
  } while (offset < bytes);
}

void recvBytes(RecvLink& link, int myRank, void* data, int64_t bytes, const Fingerprint& expected,
               const WaitContext& ctx) {
  char* p = static_cast<char*>(data);
  int64_t step = 0;
  int64_t offset = 0;
  do {
    InSlot in = link.receive(ctx);
    int64_t chunk = in.header->payloadBytes;
    // The sender cuts at its own capacity; we only require that the bytes fit what we expect.
    int64_t expectedChunk = chunk >= 0 && chunk <= bytes - offset ? chunk : bytes - offset;
    verifyHeader(*in.header, myRank, link.peer(), step, expectedChunk, expected);
    if (chunk > 0) std::memcpy(p + offset, in.payload, static_cast<size_t>(chunk));
    link.release();
    ++step;
    offset += chunk;
    if (chunk == 0) break;  // an empty message ends a transfer (only sent for 0 bytes)
  } while (offset < bytes);
}

}  // namespace ring
