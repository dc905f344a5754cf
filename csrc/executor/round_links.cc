#include "executor/round_links.h"

#include <cstring>

#include "common/errors.h"
#include "transport/stamped_link.h"

namespace ring {

FifoRound::FifoRound(Transport& t, const DirectMembers& m) : t_(t), m_(m) {
  RING_ASSERT(m.pos >= 0 && m.pos < m.size && m.rankAt(m.pos) == t.rank(), "rank ", t.rank(),
              " at position ", m.pos, " of ", m.size, " members");
}

int64_t FifoRound::capacity() const {
  return t_.sendLink(Channel::Collective, m_.rankAt((m_.pos + 1) % m_.size)).capacity();
}

void FifoRound::send(const char* blocks, int64_t blockBytes, int64_t bytes, int64_t step,
                     const Fingerprint& fp, const WaitContext& ctx) {
  const int me = t_.rank();
  for (int k = 1; k < m_.size; ++k) {
    const int to = (m_.pos + k) % m_.size;
    // Message `step` on this link: a round is one message on each link, numbered by the round.
    StampedSender link(t_.sendLink(Channel::Collective, m_.rankAt(to)), me, fp, step);
    // One slot per message: the receiver takes exactly one (receive).
    RING_ASSERT(bytes <= link.capacity(), "a direct message of ", bytes, " bytes in a slot of ",
                link.capacity());
    void* slot = link.acquire(ctx);
    link.copyIn(slot, blocks + to * blockBytes, bytes);
    link.publish(bytes);
  }
}

const void* FifoRound::receive(int from, int64_t bytes, int64_t step, const Fingerprint& fp,
                               const WaitContext& ctx) {
  return CheckedReceiver(t_.recvLink(Channel::Collective, m_.rankAt(from)), t_.rank(), fp, step)
      .receive(ctx, bytes);
}

void FifoRound::release(int from) {
  t_.recvLink(Channel::Collective, m_.rankAt(from)).release();
}

}  // namespace ring
