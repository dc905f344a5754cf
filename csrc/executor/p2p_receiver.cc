#include "executor/p2p_receiver.h"

#include <algorithm>
#include <cstring>

#include "common/errors.h"

namespace ring {

// A message from `src` as far as it has been read off the link.
struct P2PReceiver::Message {
  int src;
  int tag;
  int64_t bytes;
  uint64_t seq;      // its index among the messages from src (the header's sequence)
  int64_t step = 0;  // slots read
  int64_t moved = 0;  // bytes read
  std::vector<char> held;      // bytes read before a receive took it
  Receive* receive = nullptr;  // the receive it is read into; null while held
  bool complete() const { return step > 0 && moved >= bytes; }
};

namespace {

// Whether receive `r` takes a message with this tag from `src` (torch's recv: same tag; the
// same source, or any for recv_anysource).
bool takes(const P2PReceiver::Receive& r, int src, int tag) {
  return r.tag == tag && (r.peer < 0 || r.peer == src);
}

}  // namespace

P2PReceiver::P2PReceiver(Transport& transport)
    : transport_(transport),
      me_(transport.rank()),
      messagesFrom_(static_cast<size_t>(transport.size()), 0),
      reading_(static_cast<size_t>(transport.size()), nullptr) {
  if (transport.size() > 1) {
    capacity_ = transport.sendLink(Channel::PointToPoint, me_ == 0 ? 1 : 0).capacity();
  }
}

P2PReceiver::~P2PReceiver() = default;

void P2PReceiver::post(Receive* r) {
  r->done = false;
  r->source = -1;
  posted_.push_back(r);
}

void P2PReceiver::forget(Receive* r) {
  posted_.remove(r);
  for (auto& m : messages_) {
    if (m->receive != r) continue;
    // Hold what was read into this receive again, for the next receive that matches.
    m->held.assign(static_cast<const char*>(r->data), static_cast<const char*>(r->data) + m->moved);
    m->receive = nullptr;
  }
}

bool P2PReceiver::wanted(int src) const {
  for (const Receive* r : posted_) {
    if (r->peer == src || r->peer < 0) return true;
  }
  return false;
}

void P2PReceiver::attach(Receive* r, Message* m) {
  if (m->bytes != r->bytes) {
    throw CommError(strCat("ring: recv on rank ", me_, " of ", r->bytes, " bytes (tag ", r->tag,
                           ") but rank ", m->src, " sent ", m->bytes, " bytes with that tag"));
  }
  posted_.remove(r);
  r->source = m->src;
  if (!m->held.empty()) std::memcpy(r->data, m->held.data(), m->held.size());
  m->held.clear();
  m->held.shrink_to_fit();
  m->receive = r;
  if (m->complete()) deliver(m);
}

void P2PReceiver::deliver(Message* m) {
  m->receive->done = true;
  messages_.remove_if([m](const std::unique_ptr<Message>& p) { return p.get() == m; });
}

void P2PReceiver::match() {
  // Receives in post order; for each, the oldest message without a receive that it takes.
  for (auto it = posted_.begin(); it != posted_.end();) {
    Receive* r = *it++;  // attach() removes r from posted_
    for (auto& m : messages_) {
      if (m->receive == nullptr && takes(*r, m->src, m->tag)) {
        attach(r, m.get());
        break;
      }
    }
  }
}

bool P2PReceiver::startMessage(int src) {
  InSlot in;
  if (!transport_.recvLink(Channel::PointToPoint, src).tryReceive(&in)) return false;
  const MessageHeader& h = *in.header;
  // The first slot says which message this is (tag, size); the sequence must be the next one
  // from this source, and the rest of the header is checked as for every slot.
  const int64_t bytes = h.fingerprint.count;
  if (bytes < 0 || h.fingerprint.collective != Collective::PointToPoint) {
    verifyHeader(h, me_, src, 0, 0, pointToPointFingerprint(messagesFrom_[src], 0, 0));
  }
  verifyHeader(h, me_, src, 0, std::min(capacity_, bytes),
               pointToPointFingerprint(messagesFrom_[src], bytes, h.fingerprint.root));
  auto m = std::make_unique<Message>();
  m->src = src;
  m->tag = h.fingerprint.root;
  m->bytes = bytes;
  m->seq = messagesFrom_[src]++;
  reading_[src] = m.get();
  Message* raw = m.get();
  messages_.push_back(std::move(m));
  // The earliest posted receive that takes it, if any.
  for (Receive* r : posted_) {
    if (takes(*r, src, raw->tag)) {
      attach(r, raw);
      break;
    }
  }
  return true;
}

bool P2PReceiver::readFrom(int src) {
  Message* m = reading_[src];
  RecvLink& link = transport_.recvLink(Channel::PointToPoint, src);
  bool moved = false;
  InSlot in;
  while (!m->complete() && link.tryReceive(&in)) {
    const int64_t chunk = std::min(capacity_, m->bytes - m->moved);
    verifyHeader(*in.header, me_, src, m->step, chunk, pointToPointFingerprint(m->seq, m->bytes, m->tag));
    if (chunk > 0) {
      if (m->receive != nullptr) {
        std::memcpy(static_cast<char*>(m->receive->data) + m->moved, in.payload,
                    static_cast<size_t>(chunk));
      } else {
        const char* p = static_cast<const char*>(in.payload);
        m->held.insert(m->held.end(), p, p + chunk);
      }
    }
    link.release();
    m->moved += chunk;
    m->step++;
    moved = true;
  }
  if (m->complete()) {
    reading_[src] = nullptr;
    if (m->receive != nullptr) deliver(m);
  }
  return moved;
}

bool P2PReceiver::progress() {
  bool moved = false;
  match();
  const int n = transport_.size();
  for (int k = 1; k < n; ++k) {
    const int src = (me_ + k) % n;
    if (reading_[src] == nullptr) {
      if (!wanted(src) || !startMessage(src)) continue;
      moved = true;
    }
    moved |= readFrom(src);
  }
  return moved;
}

int P2PReceiver::linkToWaitOn() const {
  for (const Receive* r : posted_) {
    if (r->peer >= 0) return r->peer;
  }
  for (const auto& m : messages_) {
    if (m->receive != nullptr) return m->src;
  }
  return -1;
}

}  // namespace ring
