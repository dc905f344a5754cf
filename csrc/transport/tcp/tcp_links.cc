#include "transport/tcp/tcp_links.h"

#include <sys/mman.h>

#include <cstring>

#include "common/errors.h"
#include "transport/tcp/tcp_transport.h"

namespace ring {

namespace {

// A silent network failure (a cut cable, a dead switch: no reset reaches us) looks exactly like
// a stuck peer from here; only the group timeout ends the wait, so the message names both.
const char* const kNetworkCause =
    ", or the network between the two hosts is down (packets dropped without a reset)";

}  // namespace

void TcpLinkWait::checkEnded(const void* self, int peer) {
  const auto* w = static_cast<const TcpLinkWait*>(self);
  const LinkEnd end = w->state->end.load(std::memory_order_acquire);
  if (end == LinkEnd::Open || w->word->load(std::memory_order_acquire) >= w->target) return;
  if (end == LinkEnd::Failed) {
    throw CommError(strCat("ring: rank ", w->myRank, " cannot continue: ", w->state->reason));
  }
  throw CommError(strCat("ring: rank ", w->myRank, " waits for rank ", peer,
                         ", which has already shut down its process group (it closed its TCP "
                         "connections in order): the ranks disagree about what to run"));
}

SlotRing::SlotRing(int slots, int64_t slotBytes)
    : stride_(sizeof(MessageHeader) + static_cast<size_t>(slotBytes)),
      slots_(slots),
      slotBytes_(slotBytes) {
  RING_ASSERT(slots >= 1 && slotBytes >= 0, "slots ", slots, ", slot bytes ", slotBytes);
  bytes_ = stride_ * static_cast<size_t>(slots);
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    throw CommError(strCat("could not map ", bytes_, " bytes for TCP link slots (", slots, " x ",
                           slotBytes, "): ", std::strerror(e)));
  }
  base_ = static_cast<char*>(p);
}

SlotRing::~SlotRing() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

// ---- send ------------------------------------------------------------------------------------

OutSlot TcpSendLink::slotAt(uint64_t index) const {
  char* base = ring_.slot(index);
  return OutSlot{reinterpret_cast<MessageHeader*>(base), base + sizeof(MessageHeader)};
}

OutSlot TcpSendLink::acquire(const WaitContext& ctx) {
  // Slot next_ % slots is free once the I/O thread has written frame next_ - slots.
  const uint64_t slots = static_cast<uint64_t>(ring_.slots());
  uint64_t need = next_ + 1 > slots ? next_ + 1 - slots : 0;
  const TcpLinkWait wait{rank_, &written, need, &endState};
  waitUntil(written, need, writtenSleepers, peer_, "to take (over TCP) message",
            static_cast<int64_t>(next_ >= slots ? next_ - slots : 0), ctx, kNetworkCause,
            wait.asCheck());
  return slotAt(next_);
}

bool TcpSendLink::tryAcquire(OutSlot* slot) {
  const uint64_t slots = static_cast<uint64_t>(ring_.slots());
  uint64_t need = next_ + 1 > slots ? next_ + 1 - slots : 0;
  // acquire: the I/O thread's send() of the old frame finished reading the slot.
  if (written.load(std::memory_order_acquire) < need) return false;
  *slot = slotAt(next_);
  return true;
}

void TcpSendLink::publish() {
  ++next_;
  // Release (inside publishCounter): header and payload are complete before the I/O thread's
  // acquire load sees the new count and hands the bytes to the kernel.
  publishCounter(published, next_, publishedSleepers);
  // Writing from this thread saves a wake-up and a thread switch per frame (on a busy host the
  // I/O thread may wait for a core). It is done only when the socket is ours alone and the
  // frame is next in line; anything else (a queue, a partial write) is left to the I/O thread.
  if (owner_->tryWriteInline(channel_, peer_)) return;
  // seq_cst exchange after the seq_cst store above pairs with the I/O thread's "set idle, then
  // re-load published": either it sees our frame or we see it idle and wake it.
  if (ioIdle.exchange(false, std::memory_order_seq_cst)) owner_->wakeIo();
}

// ---- receive ---------------------------------------------------------------------------------

InSlot TcpRecvLink::slotAt(uint64_t index) const {
  const char* base = ring_.slot(index);
  return InSlot{reinterpret_cast<const MessageHeader*>(base), base + sizeof(MessageHeader)};
}

InSlot TcpRecvLink::receive(const WaitContext& ctx) {
  // Data already in the socket is read here rather than by a woken I/O thread: one thread
  // switch less per frame. What is not there yet arrives through the I/O thread as before.
  if (arrived.load(std::memory_order_acquire) < received_ + 1) {
    owner_->tryReadInline(channel_, peer_, received_ + 1);
  }
  const TcpLinkWait wait{rank_, &arrived, received_ + 1, &endState};
  waitUntil(arrived, received_ + 1, arrivedSleepers, peer_, "to send (over TCP) message",
            static_cast<int64_t>(received_), ctx, kNetworkCause, wait.asCheck());
  return slotAt(received_);
}

bool TcpRecvLink::tryReceive(InSlot* slot) {
  if (arrived.load(std::memory_order_acquire) < received_ + 1) return false;
  *slot = slotAt(received_);
  return true;
}

void TcpRecvLink::release() {
  ++received_;
  // Release: our reads of the slot are done before the I/O thread reads a new frame into it.
  publishCounter(consumed, received_, consumedSleepers);
  // Pairs with the I/O thread's "set paused, then re-load consumed" (both seq_cst).
  if (ioPaused.load(std::memory_order_seq_cst) &&
      ioPaused.exchange(false, std::memory_order_seq_cst)) {
    owner_->wakeIo();
  }
}

}  // namespace ring
