#include "transport/shm/shm_mailbox.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "common/errors.h"
#include "transport/streaming_copy.h"
#include "transport/wait.h"

namespace ring {

namespace {

// The head holds the MessageHeader up to its padding, then a message of at most 8 bytes.
constexpr size_t kHeaderPrefix = offsetof(MessageHeader, pad);
static_assert(kHeaderPrefix <= 8 * (MailboxHead::kWords - 1),
              "the header fits the head line beside one word of message");
constexpr int kInlineWord = MailboxHead::kWords - 1;
constexpr int64_t kInlineBytes = 8;

MessageHeader headerOf(const MailboxHead& h) {
  uint64_t w[MailboxHead::kWords];
  for (int k = 0; k < MailboxHead::kWords; ++k) w[k] = h.word[k].load(std::memory_order_relaxed);
  MessageHeader m{};
  std::memcpy(static_cast<void*>(&m), w, kHeaderPrefix);
  return m;
}

}  // namespace

ShmMailbox::ShmMailbox(Transport* owner, int rank, int nranks, const std::vector<int>& ranks,
                       const std::vector<char*>& regions, const ShmGeometry& g)
    : owner_(owner), rank_(rank), capacity_(g.mailboxBytes), bufferBytes_(g.mailboxBufferBytes()) {
  RING_ASSERT(ranks.size() == regions.size(), ranks.size(), " ranks, ", regions.size(),
              " regions");
  regionOf_.assign(static_cast<size_t>(nranks), nullptr);
  for (size_t i = 0; i < ranks.size(); ++i) regionOf_[static_cast<size_t>(ranks[i])] = regions[i];
  RING_ASSERT(regionOf_[static_cast<size_t>(rank)] != nullptr, "no mailbox of rank ", rank);
}

MailboxControl* ShmMailbox::control(int rank) const {
  return reinterpret_cast<MailboxControl*>(regionOf_[static_cast<size_t>(rank)]);
}

MailboxHead* ShmMailbox::head(int rank, uint64_t round) const {
  char* buffers = regionOf_[static_cast<size_t>(rank)] + sizeof(MailboxControl);
  return reinterpret_cast<MailboxHead*>(buffers + static_cast<size_t>(round % 2) * bufferBytes_);
}

char* ShmMailbox::payload(MailboxHead* h, int64_t bytes) {
  // Up to 8 bytes in the head's own line: one line to move for the smallest calls.
  if (bytes <= kInlineBytes) return reinterpret_cast<char*>(&h->word[kInlineWord]);
  return reinterpret_cast<char*>(h + 1);
}

void ShmMailbox::post(const void* data, int64_t bytes, const Fingerprint& fp) {
  RING_ASSERT(bytes >= 0 && bytes <= capacity_, "a mailbox message of ", bytes, " bytes (at most ",
              capacity_, ")");
  MailboxHead* h = head(rank_, rounds_);
  ++rounds_;
  uint64_t w[MailboxHead::kWords] = {};
  const MessageHeader m = makeHeader(rank_, 0, bytes, fp);
  std::memcpy(w, &m, kHeaderPrefix);
  if (bytes <= kInlineBytes) {
    if (bytes > 0) std::memcpy(&w[kInlineWord], data, static_cast<size_t>(bytes));
  } else {
    // Plain bytes: no reader looks at them before it has acquired this round's tag, and none
    // is still reading the round before last (link.h). Streamed where the group chose to
    // (Transport::setStreamCopies; the peer read these lines two rounds ago:
    // streaming_copy.h), the copy's fence ordering them before the tag's store below.
    if (owner_->streamCopies()) {
      copyForPeer(payload(h, bytes), data, static_cast<size_t>(bytes));
    } else {
      std::memcpy(payload(h, bytes), data, static_cast<size_t>(bytes));
    }
  }
  // relaxed: the tag's release store below orders them for the readers.
  for (int k = 0; k < MailboxHead::kWords; ++k) h->word[k].store(w[k], std::memory_order_relaxed);
  // The round's number, not the collective's: the calls that one coalesced task runs back to
  // back share a sequence number, and each is a round of its own.
  publishCounter(h->tag, rounds_, control(rank_)->sleepers);
}

const void* ShmMailbox::receive(int peer, int64_t bytes, const Fingerprint& fp,
                                const WaitContext& ctx) {
  RING_ASSERT(rounds_ > 0, "a mailbox receive before any post");
  RING_ASSERT(peer != rank_ && regionOf_[static_cast<size_t>(peer)] != nullptr, "peer ", peer);
  // This rank's round is rounds_ - 1: its tag is rounds_ in the peer's buffer too, when the
  // ranks agree on the rounds.
  MailboxHead* h = head(peer, rounds_ - 1);
  const uint64_t tag = rounds_;
  Waiting waiting{this, &fp, h};
  // The tags of one buffer grow round by round: >= is "posted", and anything but == is a
  // later round of the peer's.
  waitUntil(h->tag, tag, control(peer)->sleepers, peer, "to post its mailbox round",
            static_cast<int64_t>(tag - 1), ctx, nullptr,
            LinkCheck{&checkFifoQuietThunk, &waiting});
  if (h->tag.load(std::memory_order_acquire) != tag) {
    // Two rounds on: the peer finished this round without this rank's next post, so it counts
    // the rounds differently (it ran some collective another way, and went on).
    throw CommError(mismatch(peer, headerOf(*h).fingerprint, fp));
  }
  verifyHeader(headerOf(*h), rank_, peer, 0, bytes, fp);
  return payload(h, bytes);
}

bool ShmMailbox::arrived(int peer) const {
  RING_ASSERT(rounds_ > 0, "a mailbox look before any post");
  RING_ASSERT(peer != rank_ && regionOf_[static_cast<size_t>(peer)] != nullptr, "peer ", peer);
  // relaxed: only a look; the receive that reads the message acquires the tag itself.
  return head(peer, rounds_ - 1)->tag.load(std::memory_order_relaxed) >= rounds_;
}

void ShmMailbox::checkPeerNotAhead(int peer, const Fingerprint& fp) const {
  if (peer < 0 || peer >= static_cast<int>(regionOf_.size()) || peer == rank_ ||
      regionOf_[static_cast<size_t>(peer)] == nullptr) {
    return;
  }
  // The peer's latest round; acquire: its head was written before its tag was published.
  const MailboxHead* latest = head(peer, 0);
  uint64_t tag = latest->tag.load(std::memory_order_acquire);
  const MailboxHead* other = head(peer, 1);
  const uint64_t otherTag = other->tag.load(std::memory_order_acquire);
  if (otherTag > tag) {
    latest = other;
    tag = otherTag;
  }
  // Not ahead of this rank: nothing to say.
  if (tag <= rounds_) {
    suspect_ = {};
    return;
  }
  const MessageHeader m = headerOf(*latest);
  // The peer is in a round this rank has not reached, while this rank waits for it elsewhere.
  // It may just have finished what this rank waits for (the data is in flight to the wait's
  // next look), so only a second sighting of the same state, one sleep slice later, counts.
  const Suspect seen{peer, tag, fp.seq, rounds_};
  if (!(suspect_ == seen)) {
    suspect_ = seen;
    return;
  }
  throw CommError(mismatch(peer, m.fingerprint, fp));
}

std::string ShmMailbox::mismatch(int peer, const Fingerprint& theirs,
                                 const Fingerprint& mine) const {
  return strCat("ring: collective mismatch: rank ", peer, " has gone on to ", describe(theirs),
                " (a mailbox round) while rank ", rank_, " runs ", describe(mine),
                ", which rank ", peer, " ran otherwise or not at all. Every rank of a group must "
                "issue the same collectives, with the same sizes, dtypes, ops and roots, in the "
                "same order.");
}

void ShmMailbox::checkFifoQuiet(int peer, const Fingerprint& fp, const MailboxHead& h) const {
  InSlot slot;
  if (!owner_->recvLink(Channel::Collective, peer).tryReceive(&slot)) return;
  // The peer posts its round before it sends anything of a later collective: look again.
  if (h.tag.load(std::memory_order_acquire) >= rounds_) return;
  verifyHeader(*slot.header, rank_, peer, 0, slot.header->payloadBytes, fp);
  throw CommError(strCat("ring: rank ", rank_, " waits in its mailbox round of ", describe(fp),
                         " but rank ", peer, " sent that collective through the FIFOs: the ranks "
                         "disagree about TORCH_RING_LL_BYTES"));
}

void ShmMailbox::checkFifoQuietThunk(const void* self, int peer) {
  const auto* w = static_cast<const Waiting*>(self);
  w->box->checkFifoQuiet(peer, *w->fp, *w->head);
}

}  // namespace ring
