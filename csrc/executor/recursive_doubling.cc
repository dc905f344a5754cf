#include "executor/recursive_doubling.h"

#include <cstring>

#include "common/errors.h"

namespace ring {

namespace {

int largestPowerOfTwoAtMost(int m) {
  int p = 1;
  while (p * 2 <= m) p *= 2;
  return p;
}

struct Peer {
  SendLink* send;
  RecvLink* recv;
  int rank;
  bool lower;  // the peer's position is below this rank's: its operand goes first
};

Peer peerAt(Transport& t, const std::vector<int>& members, int myPos, int pos) {
  const int r = members[static_cast<size_t>(pos)];
  return Peer{&t.sendLink(Channel::Collective, r), &t.recvLink(Channel::Collective, r), r,
              pos < myPos};
}

// Both partners send slice k, then receive the partner's slice k and combine it into theirs:
// with two or more slots per link neither can block the other for good.
void exchangeAndCombine(const Peer& p, int me, char* data, int64_t count, const PlanBuffers& io,
                        const Fingerprint& fp, const WaitContext& ctx) {
  const int64_t es = static_cast<int64_t>(io.elemSize);
  const int64_t sliceElems = p.send->capacity() / es;
  RING_ASSERT(sliceElems >= 1, "slot of ", p.send->capacity(), " bytes for ", es, "-byte elements");
  int64_t step = 0;
  int64_t done = 0;
  do {
    const int64_t n = count - done < sliceElems ? count - done : sliceElems;
    char* at = data + done * es;
    OutSlot out = p.send->acquire(ctx);
    if (n > 0) std::memcpy(out.payload, at, static_cast<size_t>(n * es));
    fillHeader(out.header, me, step, n * es, fp);
    p.send->publish();
    InSlot in = p.recv->receive(ctx);
    verifyHeader(*in.header, me, p.rank, step, n * es, fp);
    if (p.lower) {
      io.combine(at, in.payload, at, n);
    } else {
      io.combine(at, at, in.payload, n);
    }
    p.recv->release();
    ++step;
    done += n;
  } while (done < count);
}

// Folding in: the lower rank of a pair hands its buffer over; the upper one combines it first.
void receiveAndCombine(const Peer& lower, int me, char* data, int64_t count,
                       const PlanBuffers& io, const Fingerprint& fp, const WaitContext& ctx) {
  const int64_t es = static_cast<int64_t>(io.elemSize);
  const int64_t sliceElems = lower.send->capacity() / es;
  int64_t step = 0;
  int64_t done = 0;
  do {
    // sendBytes cuts at the link's capacity, which both ends of a link share.
    const int64_t n = count - done < sliceElems ? count - done : sliceElems;
    InSlot in = lower.recv->receive(ctx);
    verifyHeader(*in.header, me, lower.rank, step, n * es, fp);
    io.combine(data + done * es, in.payload, data + done * es, n);
    lower.recv->release();
    ++step;
    done += n;
  } while (done < count);
}

}  // namespace

int recursiveDoublingRounds(int members) {
  if (members <= 1) return 0;
  const int p = largestPowerOfTwoAtMost(members);
  int rounds = 0;
  for (int d = 1; d < p; d *= 2) ++rounds;
  return rounds + (p == members ? 0 : 2);
}

void recursiveDoublingAllReduce(Transport& t, const std::vector<int>& members, int pos,
                                char* data, int64_t count, const PlanBuffers& io,
                                const Fingerprint& fp, const WaitContext& ctx) {
  const int m = static_cast<int>(members.size());
  const int me = t.rank();
  RING_ASSERT(pos >= 0 && pos < m && members[static_cast<size_t>(pos)] == me, "rank ", me,
              " at position ", pos, " of ", m);
  const int64_t bytes = count * static_cast<int64_t>(io.elemSize);
  const int p = largestPowerOfTwoAtMost(m);
  const int extra = m - p;
  if (pos < 2 * extra && pos % 2 == 0) {
    // Folded out: hand the buffer to the next position, take the result back.
    Peer up = peerAt(t, members, pos, pos + 1);
    sendBytes(*up.send, me, data, bytes, fp, ctx);
    recvBytes(*up.recv, me, data, bytes, fp, ctx);
    return;
  }
  if (pos < 2 * extra) receiveAndCombine(peerAt(t, members, pos, pos - 1), me, data, count, io, fp, ctx);
  // Positions of the p ranks that stay: the odd ones of the folded pairs, then the rest.
  const int virtualPos = pos < 2 * extra ? pos / 2 : pos - extra;
  auto realPos = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  for (int d = 1; d < p; d *= 2) {
    exchangeAndCombine(peerAt(t, members, pos, realPos(virtualPos ^ d)), me, data, count, io, fp,
                       ctx);
  }
  if (io.divide) io.divide(data, io.divisor, count);
  if (pos < 2 * extra) {
    Peer down = peerAt(t, members, pos, pos - 1);
    sendBytes(*down.send, me, data, bytes, fp, ctx);
  }
}

}  // namespace ring
