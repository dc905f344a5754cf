#include "executor/direct_collectives.h"

#include <cstring>
#include <vector>

#include "common/errors.h"

namespace ring {

namespace {

// This rank's message to every other rank, the next rank first (so that, like the ring, the
// first message goes to the rank that is usually waiting for it). A slot stays acquired only
// for its copy: a peer that is a call behind holds at most one of our slots per call, and
// every FIFO has at least two.
void sendToAll(Transport& t, const void* data, int64_t bytes, const Fingerprint& fp,
               const WaitContext& ctx) {
  const int me = t.rank();
  const int n = t.size();
  for (int k = 1; k < n; ++k) {
    SendLink& link = t.sendLink(Channel::Collective, (me + k) % n);
    // One slot per message: the receivers take exactly one (receiveFrom).
    RING_ASSERT(bytes <= link.capacity(), "a direct message of ", bytes, " bytes");
    sendBytes(link, me, data, bytes, fp, ctx);
  }
}

// The head slot of the link from `peer`, checked: the one message of this collective.
InSlot receiveFrom(Transport& t, int peer, int64_t bytes, const Fingerprint& fp,
                   const WaitContext& ctx) {
  InSlot in = t.recvLink(Channel::Collective, peer).receive(ctx);
  // Read after the acquire inside receive(): the sender wrote it before its publish.
  verifyHeader(*in.header, t.rank(), peer, 0, bytes, fp);
  return in;
}

}  // namespace

void directAllReduce(Transport& t, void* data, int64_t count, const PlanBuffers& io,
                     const Fingerprint& fp, const WaitContext& ctx) {
  const int me = t.rank();
  const int n = t.size();
  const int64_t bytes = count * static_cast<int64_t>(io.elemSize);
  sendToAll(t, data, bytes, fp, ctx);

  // The n contributions, by rank. Every peer's stays in its slot until the sum is done (one
  // slot per link, all different links).
  // On the stack up to 16 ranks: a heap allocation per call is a measurable share of a
  // 4 KiB all_reduce (docs/latency_cpu.md).
  const void* partsHere[16];
  std::vector<const void*> partsHeap(n > 16 ? static_cast<size_t>(n) : 0);
  const void** part = n > 16 ? partsHeap.data() : partsHere;
  for (int k = 1; k < n; ++k) {
    const int peer = (me - k + n) % n;
    part[static_cast<size_t>(peer)] = receiveFrom(t, peer, bytes, fp, ctx).payload;
  }
  // The sum builds up in `data`, which holds this rank's own contribution. Ranks 0 and 1 read
  // theirs in the first combine (element by element, before it is overwritten); a later rank
  // needs its own contribution after the first combine, so it keeps a copy.
  std::vector<char> own;
  if (me >= 2) {
    own.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
    part[static_cast<size_t>(me)] = own.data();
  } else {
    part[static_cast<size_t>(me)] = data;
  }
  io.combine(data, part[0], part[1], count);
  for (int r = 2; r < n; ++r) io.combine(data, data, part[static_cast<size_t>(r)], count);
  if (io.divide) io.divide(data, io.divisor, count);

  for (int k = 1; k < n; ++k) t.recvLink(Channel::Collective, (me - k + n) % n).release();
}

void directAllGather(Transport& t, const void* input, void* output, int64_t countPerRank,
                     size_t elemSize, const Fingerprint& fp, const WaitContext& ctx) {
  const int me = t.rank();
  const int n = t.size();
  const int64_t bytes = countPerRank * static_cast<int64_t>(elemSize);
  char* out = static_cast<char*>(output);
  sendToAll(t, input, bytes, fp, ctx);
  // An input that is already this rank's block of the output (FSDP) needs no copy.
  if (out + me * bytes != input && bytes > 0) {
    std::memmove(out + me * bytes, input, static_cast<size_t>(bytes));
  }
  for (int k = 1; k < n; ++k) {
    const int peer = (me - k + n) % n;
    InSlot in = receiveFrom(t, peer, bytes, fp, ctx);
    if (bytes > 0) std::memcpy(out + peer * bytes, in.payload, static_cast<size_t>(bytes));
    t.recvLink(Channel::Collective, peer).release();
  }
}

}  // namespace ring
