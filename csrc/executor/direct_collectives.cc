#include "executor/direct_collectives.h"

#include <cstring>
#include <vector>

#include "common/errors.h"
#include "transport/stamped_link.h"

namespace ring {

namespace {

// Member (pos + k)'s message: its block of `blocks` (blockBytes apart; 0: one message for
// all), `bytes` of it from `offset`. The next member first (so that, like the ring, the first
// message goes to the rank that is usually waiting for it). A slot stays acquired only for its
// copy: a peer that is a call behind holds at most one of our slots per call, and every FIFO
// has at least two.
void sendEachItsBlock(Transport& t, const DirectMembers& m, const char* blocks,
                      int64_t blockBytes, int64_t offset, int64_t bytes, int64_t step,
                      const Fingerprint& fp, const WaitContext& ctx) {
  const int me = t.rank();
  for (int k = 1; k < m.size; ++k) {
    const int to = (m.pos + k) % m.size;
    // Message `step` on this link: the slices are numbered by the round, one message each.
    StampedSender link(t.sendLink(Channel::Collective, m.rankAt(to)), me, fp, step);
    // One slot per message: the receivers take exactly one (receiveFrom).
    RING_ASSERT(bytes <= link.capacity(), "a direct message of ", bytes, " bytes");
    void* slot = link.acquire(ctx);
    if (bytes > 0) {
      std::memcpy(slot, blocks + to * blockBytes + offset, static_cast<size_t>(bytes));
    }
    link.publish(bytes);
  }
}

// The same message to every other member.
void sendToAll(Transport& t, const DirectMembers& m, const void* data, int64_t bytes,
               int64_t step, const Fingerprint& fp, const WaitContext& ctx) {
  sendEachItsBlock(t, m, static_cast<const char*>(data), 0, 0, bytes, step, fp, ctx);
}

// The payload of the head slot of the link from `peer`, checked: message `step` of this
// collective, `bytes` long. Released by the caller once read.
const void* receiveFrom(Transport& t, int peer, int64_t bytes, int64_t step,
                        const Fingerprint& fp, const WaitContext& ctx) {
  return CheckedReceiver(t.recvLink(Channel::Collective, peer), t.rank(), fp, step)
      .receive(ctx, bytes);
}

}  // namespace

void combineInPositionOrder(char* at, const void** part, int n, int pos, int64_t elems,
                            const PlanBuffers& io, std::vector<char>* own) {
  const size_t bytes = static_cast<size_t>(elems) * io.elemSize;
  // The sum builds up in `at`, which holds this rank's own contribution. Positions 0 and 1
  // read theirs in the first combine (element by element, before it is overwritten); a
  // later one needs its own contribution after the first combine, so it keeps a copy.
  if (pos >= 2) {
    own->assign(at, at + bytes);
    part[static_cast<size_t>(pos)] = own->data();
  } else {
    part[static_cast<size_t>(pos)] = at;
  }
  io.combine(at, part[0], part[1], elems);
  for (int r = 2; r < n; ++r) io.combine(at, at, part[static_cast<size_t>(r)], elems);
  if (io.divide) io.divide(at, io.divisor, elems);
}

void directAllReduce(Transport& t, void* data, int64_t count, const PlanBuffers& io,
                     const Fingerprint& fp, const WaitContext& ctx) {
  directAllReduceAmong(t, DirectMembers{nullptr, t.size(), t.rank()}, static_cast<char*>(data),
                       count, io, fp, ctx);
}

namespace {

// The direct reduction both directAllReduceAmong and directReduceScatterAmong are: each member
// sends member i its block i of `blocks` (blockBytes apart; 0: one message for every member)
// and sums the n members' slices of its own block, in position order, into `sum` (count
// elements, which holds this member's own contribution), then io.divide. n >= 2.
void reduceOwnBlockAmong(Transport& t, const DirectMembers& m, const char* blocks,
                         int64_t blockBytes, char* sum, int64_t count, const PlanBuffers& io,
                         const Fingerprint& fp, const WaitContext& ctx) {
  const int n = m.size;
  const int64_t es = static_cast<int64_t>(io.elemSize);
  const int64_t sliceElems =
      t.sendLink(Channel::Collective, m.rankAt((m.pos + 1) % n)).capacity() / es;
  RING_ASSERT(sliceElems > 0, "a slot smaller than one element of ", es, " bytes");
  // The n contributions, by position. Every peer's stays in its slot until the sum is done
  // (one slot per link, all different links).
  // On the stack up to 16 ranks: a heap allocation per call is a measurable share of a
  // 4 KiB all_reduce (docs/latency_cpu.md).
  const void* partsHere[16];
  std::vector<const void*> partsHeap(n > 16 ? static_cast<size_t>(n) : 0);
  const void** part = n > 16 ? partsHeap.data() : partsHere;
  std::vector<char> own;
  // Slice by slice: a peer's slice k+1 can only be sent once it has received our slice k, so
  // at most two of our slices sit in its FIFO (every FIFO has at least two slots). A group's
  // direct round within one host is always one slice (plan_choice.h, directInsideOneHost).
  int64_t done = 0;
  int64_t slice = 0;
  do {
    const int64_t elems = count - done < sliceElems ? count - done : sliceElems;
    const int64_t bytes = elems * es;
    // Sent before the sum below overwrites it (all_reduce: blocks is sum).
    sendEachItsBlock(t, m, blocks, blockBytes, done * es, bytes, slice, fp, ctx);
    for (int k = 1; k < n; ++k) {
      const int peer = (m.pos - k + n) % n;
      part[static_cast<size_t>(peer)] = receiveFrom(t, m.rankAt(peer), bytes, slice, fp, ctx);
    }
    combineInPositionOrder(sum + done * es, part, n, m.pos, elems, io, &own);
    for (int k = 1; k < n; ++k) {
      t.recvLink(Channel::Collective, m.rankAt((m.pos - k + n) % n)).release();
    }
    done += elems;
    ++slice;
  } while (done < count);
}

}  // namespace

void directAllReduceAmong(Transport& t, const DirectMembers& m, char* data, int64_t count,
                          const PlanBuffers& io, const Fingerprint& fp, const WaitContext& ctx) {
  const int me = t.rank();
  const int n = m.size;
  RING_ASSERT(m.pos >= 0 && m.pos < n && m.rankAt(m.pos) == me, "rank ", me, " at position ",
              m.pos, " of ", n);
  if (n == 1) {
    if (io.divide) io.divide(data, io.divisor, count);
    return;
  }
  reduceOwnBlockAmong(t, m, data, 0, data, count, io, fp, ctx);
}

void directAllGather(Transport& t, const void* input, void* output, int64_t countPerRank,
                     size_t elemSize, const Fingerprint& fp, const WaitContext& ctx) {
  directAllGatherAmong(t, DirectMembers{nullptr, t.size(), t.rank()}, input, output,
                       countPerRank, elemSize, fp, ctx);
}

void directAllGatherAmong(Transport& t, const DirectMembers& m, const void* input, void* output,
                          int64_t countPerRank, size_t elemSize, const Fingerprint& fp,
                          const WaitContext& ctx) {
  const int n = m.size;
  RING_ASSERT(m.pos >= 0 && m.pos < n && m.rankAt(m.pos) == t.rank(), "rank ", t.rank(),
              " at position ", m.pos, " of ", n);
  const int64_t es = static_cast<int64_t>(elemSize);
  const int64_t blockBytes = countPerRank * es;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  // An input that is already this rank's block of the output (FSDP) needs no copy.
  if (out + m.pos * blockBytes != in && blockBytes > 0) {
    std::memmove(out + m.pos * blockBytes, in, static_cast<size_t>(blockBytes));
  }
  if (n == 1) return;
  // Slice by slice, as directAllReduceAmong: slice k+1 goes out only once every member's
  // slice k has arrived, so at most two of our slices sit in any peer's FIFO.
  const int64_t sliceElems =
      t.sendLink(Channel::Collective, m.rankAt((m.pos + 1) % n)).capacity() / es;
  RING_ASSERT(sliceElems > 0, "a slot smaller than one element of ", es, " bytes");
  int64_t done = 0;
  int64_t slice = 0;
  do {
    const int64_t elems = countPerRank - done < sliceElems ? countPerRank - done : sliceElems;
    const int64_t bytes = elems * es;
    // From our own block of the output: the input may be that block, already copied there.
    sendToAll(t, m, out + m.pos * blockBytes + done * es, bytes, slice, fp, ctx);
    for (int k = 1; k < n; ++k) {
      const int peer = (m.pos - k + n) % n;
      const void* got = receiveFrom(t, m.rankAt(peer), bytes, slice, fp, ctx);
      if (bytes > 0) {
        std::memcpy(out + peer * blockBytes + done * es, got, static_cast<size_t>(bytes));
      }
      t.recvLink(Channel::Collective, m.rankAt(peer)).release();
    }
    done += elems;
    ++slice;
  } while (done < countPerRank);
}

void directReduceScatterAmong(Transport& t, const DirectMembers& m, const char* input,
                              char* output, int64_t countPerRank, const PlanBuffers& io,
                              const Fingerprint& fp, const WaitContext& ctx) {
  const int n = m.size;
  RING_ASSERT(m.pos >= 0 && m.pos < n && m.rankAt(m.pos) == t.rank(), "rank ", t.rank(),
              " at position ", m.pos, " of ", n);
  const int64_t blockBytes = countPerRank * static_cast<int64_t>(io.elemSize);
  // The sum builds up in the output, which starts as this member's own block.
  if (blockBytes > 0) {
    std::memcpy(output, input + m.pos * blockBytes, static_cast<size_t>(blockBytes));
  }
  if (n == 1) {
    if (io.divide) io.divide(output, io.divisor, countPerRank);
    return;
  }
  reduceOwnBlockAmong(t, m, input, blockBytes, output, countPerRank, io, fp, ctx);
}

}  // namespace ring
