#include "executor/recursive_multiplying.h"

#include <algorithm>

#include "common/errors.h"
#include "executor/direct_collectives.h"
#include "transport/stamped_link.h"

namespace ring {

namespace {

struct Peer {
  SendLink* send;
  RecvLink* recv;
  int rank;
};

Peer peerAt(Transport& t, const std::vector<int>& members, int pos) {
  const int r = members[static_cast<size_t>(pos)];
  return Peer{&t.sendLink(Channel::Collective, r), &t.recvLink(Channel::Collective, r), r};
}

// Folding in: the lower position hands its buffer over (sendBytes); its operand goes first, as
// in every combine of the plan.
void receiveAndCombine(const Peer& lower, int me, char* data, int64_t count,
                       const PlanBuffers& io, const Fingerprint& fp, const WaitContext& ctx) {
  const int64_t es = static_cast<int64_t>(io.elemSize);
  // sendBytes cuts at the link's capacity, which both ends of a link share.
  const int64_t sliceElems = lower.send->capacity() / es;
  CheckedReceiver in(*lower.recv, me, fp);
  int64_t done = 0;
  do {
    const int64_t n = std::min(count - done, sliceElems);
    const void* payload = in.receive(ctx, n * es);
    io.combine(data + done * es, payload, data + done * es, n);
    in.release();
    done += n;
  } while (done < count);
}

}  // namespace

void recursiveAllReduce(Transport& t, const std::vector<int>& members, int pos,
                        const RadixSchedule& schedule, char* data, int64_t count,
                        const PlanBuffers& io, const Fingerprint& fp, const WaitContext& ctx) {
  const int m = static_cast<int>(members.size());
  const int me = t.rank();
  RING_ASSERT(pos >= 0 && pos < m && members[static_cast<size_t>(pos)] == me &&
                  schedule.members == m,
              "rank ", me, " at position ", pos, " of ", m, ", schedule for ", schedule.members);
  const int64_t bytes = count * static_cast<int64_t>(io.elemSize);
  const int extra = schedule.folded();
  if (pos < 2 * extra && pos % 2 == 0) {
    // Folded out: hand the buffer to the next position, take the result back.
    Peer up = peerAt(t, members, pos + 1);
    sendBytes(*up.send, me, data, bytes, fp, ctx);
    recvBytes(*up.recv, me, data, bytes, fp, ctx);
    return;
  }
  if (pos < 2 * extra) receiveAndCombine(peerAt(t, members, pos - 1), me, data, count, io, fp, ctx);
  // Virtual positions of the ranks that stay: the odd ones of the folded pairs, then the rest.
  const int virtualPos = pos < 2 * extra ? pos / 2 : pos - extra;
  auto realPos = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  // A round is a direct all-reduce among its ranks (direct_collectives.h: each sends its
  // slice to the others, next position first, and sums the parts in position order); only the
  // last division (AVG) waits for the end.
  PlanBuffers round = io;
  round.divide = nullptr;
  std::vector<int> ranks;
  int weight = 1;  // the place value of the round's digit
  for (int radix : schedule.radices) {
    const int digit = (virtualPos / weight) % radix;
    const int base = virtualPos - digit * weight;
    ranks.clear();
    for (int d = 0; d < radix; ++d) {
      ranks.push_back(members[static_cast<size_t>(realPos(base + d * weight))]);
    }
    FifoRound links(t, DirectMembers{ranks.data(), radix, digit});
    directAllReduce(links, data, count, round, fp, ctx);
    weight *= radix;
  }
  if (io.divide) io.divide(data, io.divisor, count);
  if (pos < 2 * extra) {
    Peer down = peerAt(t, members, pos - 1);
    sendBytes(*down.send, me, data, bytes, fp, ctx);
  }
}

}  // namespace ring
