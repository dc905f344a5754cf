#include "executor/direct_collectives.h"

#include <cstring>
#include <vector>

#include "common/errors.h"

namespace ring {

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

namespace {

void checkPosition(const DirectMembers& m, const char* collective) {
  RING_ASSERT(m.pos >= 0 && m.pos < m.size, "a direct ", collective, " at position ", m.pos,
              " of ", m.size, " members");
}

// How many elements of `elemSize` bytes one round carries.
template <class Round>
int64_t sliceElemsOf(const Round& round, size_t elemSize) {
  const int64_t slice = round.capacity() / static_cast<int64_t>(elemSize);
  RING_ASSERT(slice > 0, "a round of ", round.capacity(), " bytes, smaller than one element of ",
              elemSize, " bytes");
  return slice;
}

// The direct reduction both directAllReduce and directReduceScatter are: each member sends
// member i its block i of `blocks` (blockBytes apart; 0: one message for every member) and
// sums the n members' slices of its own block, in position order, into `sum` (count elements,
// which holds this member's own contribution), then io.divide. n >= 2.
template <class Round>
void reduceOwnBlock(Round& round, const char* blocks, int64_t blockBytes, char* sum,
                    int64_t count, const PlanBuffers& io, const Fingerprint& fp,
                    const WaitContext& ctx) {
  const DirectMembers& m = round.members();
  const int n = m.size;
  const int64_t es = static_cast<int64_t>(io.elemSize);
  const int64_t sliceElems = sliceElemsOf(round, io.elemSize);
  // The n contributions, by position; every peer's stays where the round left it until the
  // sum is done. On the stack up to 16 members, and this thread's copy of its own part kept:
  // a heap allocation per call is a measurable share of a 4 KiB all_reduce
  // (docs/notes/latency_cpu.md).
  const void* partsHere[16];
  std::vector<const void*> partsHeap(n > 16 ? static_cast<size_t>(n) : 0);
  const void** part = n > 16 ? partsHeap.data() : partsHere;
  thread_local std::vector<char> own;
  // Slice by slice, each a round: a peer's slice k+1 can only be sent once it has received our
  // slice k, so at most two of our slices sit in its FIFO (every FIFO has at least two slots),
  // and a mailbox is posted again only after every peer's slice k was read. A group's direct
  // round within one host is always one slice (plan_choice.h, directInsideOneHost).
  int64_t done = 0;
  int64_t slice = 0;
  do {
    const int64_t elems = count - done < sliceElems ? count - done : sliceElems;
    const int64_t bytes = elems * es;
    // Sent before the sum below overwrites it (all_reduce: blocks is sum).
    round.send(blocks + done * es, blockBytes, bytes, slice, fp, ctx);
    // The previous member first: each member sends to its next first.
    for (int k = 1; k < n; ++k) {
      const int peer = (m.pos - k + n) % n;
      part[static_cast<size_t>(peer)] = round.receive(peer, bytes, slice, fp, ctx);
    }
    combineInPositionOrder(sum + done * es, part, n, m.pos, elems, io, &own);
    for (int k = 1; k < n; ++k) round.release((m.pos - k + n) % n);
    done += elems;
    ++slice;
  } while (done < count);
}

}  // namespace

template <class Round>
void directAllReduce(Round& round, char* data, int64_t count, const PlanBuffers& io,
                     const Fingerprint& fp, const WaitContext& ctx) {
  checkPosition(round.members(), "all_reduce");
  if (round.members().size == 1) {
    if (io.divide) io.divide(data, io.divisor, count);
    return;
  }
  reduceOwnBlock(round, data, 0, data, count, io, fp, ctx);
}

template <class Round>
void directAllGather(Round& round, const void* input, void* output, int64_t countPerRank,
                     size_t elemSize, const Fingerprint& fp, const WaitContext& ctx) {
  const DirectMembers& m = round.members();
  checkPosition(m, "all_gather");
  const int n = m.size;
  const int64_t es = static_cast<int64_t>(elemSize);
  const int64_t blockBytes = countPerRank * es;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  char* mine = out + m.pos * blockBytes;
  // An input that is already this rank's block of the output (FSDP) needs no copy. A message
  // posted ahead (MailboxRound) went from the input: the same bytes.
  if (mine != in && blockBytes > 0) std::memmove(mine, in, static_cast<size_t>(blockBytes));
  if (n == 1) return;
  const int64_t sliceElems = sliceElemsOf(round, elemSize);
  // Slice by slice, as reduceOwnBlock: slice k+1 goes out only once every member's slice k has
  // arrived.
  int64_t done = 0;
  int64_t slice = 0;
  do {
    const int64_t elems = countPerRank - done < sliceElems ? countPerRank - done : sliceElems;
    const int64_t bytes = elems * es;
    // From our own block of the output: the input may be that block, already copied there.
    round.send(mine + done * es, 0, bytes, slice, fp, ctx);
    for (int k = 1; k < n; ++k) {
      const int peer = (m.pos - k + n) % n;
      const void* got = round.receive(peer, bytes, slice, fp, ctx);
      if (bytes > 0) {
        std::memcpy(out + peer * blockBytes + done * es, got, static_cast<size_t>(bytes));
      }
      round.release(peer);
    }
    done += elems;
    ++slice;
  } while (done < countPerRank);
}

template <class Round>
void directReduceScatter(Round& round, const char* input, char* output, int64_t countPerRank,
                         const PlanBuffers& io, const Fingerprint& fp, const WaitContext& ctx) {
  const DirectMembers& m = round.members();
  checkPosition(m, "reduce_scatter");
  const int64_t blockBytes = countPerRank * static_cast<int64_t>(io.elemSize);
  // The sum builds up in the output, which starts as this member's own block.
  if (blockBytes > 0) {
    std::memcpy(output, input + m.pos * blockBytes, static_cast<size_t>(blockBytes));
  }
  if (m.size == 1) {
    if (io.divide) io.divide(output, io.divisor, countPerRank);
    return;
  }
  reduceOwnBlock(round, input, blockBytes, output, countPerRank, io, fp, ctx);
}

template <class Round>
void directBarrier(Round& round, const Fingerprint& fp, const WaitContext& ctx) {
  const DirectMembers& m = round.members();
  checkPosition(m, "barrier");
  if (m.size == 1) return;
  round.send(nullptr, 0, 0, 0, fp, ctx);
  // Every other member's message: a barrier that only sent would let this rank leave before
  // the others arrive.
  for (int k = 1; k < m.size; ++k) round.receive((m.pos - k + m.size) % m.size, 0, 0, fp, ctx);
  for (int k = 1; k < m.size; ++k) round.release((m.pos - k + m.size) % m.size);
}

// The protocols the algorithms run over (round_links.h), where a plan takes them: no mailbox
// reduce_scatter (a mailbox message is one for every member), and a barrier only through the
// mailboxes (without them, a barrier is the ring's: reducing_collectives.cc).
template void directAllReduce(FifoRound&, char*, int64_t, const PlanBuffers&,
                              const Fingerprint&, const WaitContext&);
template void directAllReduce(MailboxRound&, char*, int64_t, const PlanBuffers&,
                              const Fingerprint&, const WaitContext&);
template void directAllGather(FifoRound&, const void*, void*, int64_t, size_t,
                              const Fingerprint&, const WaitContext&);
template void directAllGather(MailboxRound&, const void*, void*, int64_t, size_t,
                              const Fingerprint&, const WaitContext&);
template void directReduceScatter(FifoRound&, const char*, char*, int64_t, const PlanBuffers&,
                                  const Fingerprint&, const WaitContext&);
template void directBarrier(MailboxRound&, const Fingerprint&, const WaitContext&);

}  // namespace ring
