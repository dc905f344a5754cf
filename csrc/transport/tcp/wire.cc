#include "transport/tcp/wire.h"

#include <cstring>

#include "common/errors.h"
#include "transport/link.h"

namespace ring {
namespace {

bool fail(std::string* error, std::string why) {
  if (error != nullptr) *error = std::move(why);
  return false;
}

bool isZero(const uint8_t* p, size_t n) {
  uint8_t acc = 0;
  for (size_t i = 0; i < n; ++i) acc |= p[i];
  return acc == 0;
}

const char* kindName(uint32_t k) {
  switch (k) {
    case static_cast<uint32_t>(HandshakeKind::Hello):
      return "hello";
    case static_cast<uint32_t>(HandshakeKind::Reply):
      return "reply";
    case static_cast<uint32_t>(HandshakeKind::Confirm):
      return "confirm";
    default:
      return "unknown";
  }
}

// The fields a later message of the handshake must repeat unchanged from the Hello: a
// message spliced in from another connection differs in at least the connector's nonce.
bool sameConnection(const HandshakeMsg& a, const HandshakeMsg& b, std::string* error) {
  if (a.channel != b.channel || a.groupHash != b.groupHash || a.srcRank != b.srcRank ||
      a.dstRank != b.dstRank || a.slotBytes != b.slotBytes) {
    return fail(error, strCat("the ", kindName(a.kind), " names channel ", a.channel, ", ranks ",
                              a.srcRank, " -> ", a.dstRank, ", slot bytes ", a.slotBytes,
                              " but the connection was opened for channel ", b.channel,
                              ", ranks ", b.srcRank, " -> ", b.dstRank, ", slot bytes ",
                              b.slotBytes));
  }
  if (!constantTimeEqual(a.connectorNonce, b.connectorNonce, kNonceBytes)) {
    return fail(error, strCat("the ", kindName(a.kind),
                              " does not echo this connection's nonce (a replayed message?)"));
  }
  return true;
}

}  // namespace

bool constantTimeEqual(const uint8_t* a, const uint8_t* b, size_t n) {
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

uint64_t groupNameHash(const std::string& groupName) {
  // The first 8 bytes of SHA-256: stable across processes and builds (std::hash is not).
  Sha256Digest d = sha256(groupName.data(), groupName.size());
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = h << 8 | d[i];
  return h;
}

HandshakeKey handshakeKey(const JobToken& token, const std::string& secret) {
  HandshakeKey key;
  static_assert(sizeof key == sizeof token, "the token serves as the key without a secret");
  if (secret.empty()) {
    std::memcpy(key.data(), token.data(), key.size());
    return key;
  }
  // Keyed by the secret, over the token: without the secret, the token alone (which anyone who
  // can read the store has) yields nothing; with it, each job still gets its own key.
  static const char kLabel[] = "torch_ring tcp v2 key";
  HmacSha256 h(secret.data(), secret.size());
  h.update(kLabel, sizeof kLabel);
  h.update(token.data(), token.size());
  return h.finish();
}

Sha256Digest handshakeProof(const HandshakeKey& key, ProofRole role, const HandshakeMsg& m) {
  // The label separates the two proofs of one handshake, so that neither can stand in for the
  // other; every field that identifies the connection is bound into both.
  static const char kAcceptor[] = "torch_ring tcp v2 acceptor";
  static const char kConnector[] = "torch_ring tcp v2 connector";
  HmacSha256 h(key.data(), key.size());
  if (role == ProofRole::Acceptor) {
    h.update(kAcceptor, sizeof kAcceptor);
  } else {
    h.update(kConnector, sizeof kConnector);
  }
  h.update(&m.groupHash, sizeof m.groupHash);
  h.update(&m.srcRank, sizeof m.srcRank);
  h.update(&m.dstRank, sizeof m.dstRank);
  h.update(&m.channel, sizeof m.channel);
  h.update(&m.slotBytes, sizeof m.slotBytes);
  h.update(m.connectorNonce, kNonceBytes);
  h.update(m.acceptorNonce, kNonceBytes);
  return h.finish();
}

bool parseHandshake(const uint8_t* data, size_t n, HandshakeKind expectedKind, HandshakeMsg* out,
                    std::string* error) {
  if (n != sizeof(HandshakeMsg)) {
    return fail(error, strCat("handshake message of ", n, " bytes, expected ",
                              sizeof(HandshakeMsg)));
  }
  std::memcpy(out, data, sizeof(HandshakeMsg));  // copy: `data` need not be aligned
  if (out->magic != kHandshakeMagic) {
    return fail(error, strCat("not a torch_ring handshake (magic 0x", std::hex, out->magic,
                              std::dec, ")"));
  }
  if (out->version != kWireVersion) {
    return fail(error, strCat("wire version ", out->version, ", this build speaks ",
                              kWireVersion, ": all ranks must run the same torch_ring_backend"));
  }
  if (out->kind != static_cast<uint32_t>(expectedKind)) {
    return fail(error, strCat("handshake step ", kindName(out->kind), " (", out->kind,
                              ") where a ", kindName(static_cast<uint32_t>(expectedKind)),
                              " was expected"));
  }
  return true;
}

bool checkHello(const HandshakeMsg& hello, const HelloExpectations& e, std::string* error) {
  if (hello.groupHash != e.groupHash) {
    return fail(error, strCat("hello for another group (hash 0x", std::hex, hello.groupHash,
                              ", this group 0x", e.groupHash, std::dec, ")"));
  }
  if (hello.dstRank != e.myRank) {
    return fail(error, strCat("hello addressed to rank ", hello.dstRank, ", this is rank ",
                              e.myRank));
  }
  // Only lower ranks connect to higher ones; anything else is not a rank of this group.
  if (hello.srcRank < 0 || hello.srcRank >= e.myRank) {
    return fail(error, strCat("hello from rank ", hello.srcRank, ": only ranks 0..",
                              e.myRank - 1, " connect to rank ", e.myRank, " (group of ",
                              e.groupSize, ")"));
  }
  if (hello.channel < 0 || hello.channel >= kChannels) {
    return fail(error, strCat("hello for channel ", hello.channel, " (valid: 0..",
                              kChannels - 1, ")"));
  }
  if (hello.slotBytes != e.slotBytes) {
    return fail(error, strCat("rank ", hello.srcRank, " uses ", hello.slotBytes,
                              "-byte slots, this rank ", e.slotBytes,
                              ": ranks must agree about TORCH_RING_SLOT_BYTES"));
  }
  if (!isZero(hello.acceptorNonce, kNonceBytes) || !isZero(hello.proof, sizeof hello.proof)) {
    return fail(error, "hello with a nonce or proof filled in where zeros belong");
  }
  return true;
}

bool checkReply(const HandshakeMsg& reply, const HandshakeMsg& hello, const HandshakeKey& key,
                std::string* error) {
  if (!sameConnection(reply, hello, error)) return false;
  Sha256Digest want = handshakeProof(key, ProofRole::Acceptor, reply);
  if (!constantTimeEqual(want.data(), reply.proof, want.size())) {
    return fail(error, strCat("rank ", hello.dstRank,
                              " did not prove the job's key: its TORCH_RING_SECRET differs from "
                              "this rank's (or one of the two has none), or a process of another "
                              "job (or a stranger) answered at its address"));
  }
  return true;
}

bool checkConfirm(const HandshakeMsg& confirm, const HandshakeMsg& reply,
                  const HandshakeKey& key, std::string* error) {
  if (!sameConnection(confirm, reply, error)) return false;
  if (!constantTimeEqual(confirm.acceptorNonce, reply.acceptorNonce, kNonceBytes)) {
    return fail(error, "the confirm does not echo this connection's acceptor nonce");
  }
  Sha256Digest want = handshakeProof(key, ProofRole::Connector, confirm);
  if (!constantTimeEqual(want.data(), confirm.proof, want.size())) {
    return fail(error, strCat("wrong key: the peer claiming to be rank ", confirm.srcRank,
                              " did not prove the job's key (the store's token, and "
                              "TORCH_RING_SECRET when set)"));
  }
  return true;
}

// ---- frames ---------------------------------------------------------------------------------

ReadStatus parseFrameHeader(const MessageHeader& h, int expectedSender, int64_t capacity,
                            int64_t* payloadBytes, std::string* error) {
  ReadStatus kind;
  int64_t limit;
  switch (h.magic) {
    case kMessageMagic:
      kind = ReadStatus::Data;
      limit = capacity;
      break;
    case kGoodbyeMagic:
      kind = ReadStatus::Goodbye;
      limit = 0;
      break;
    case kBrokenMagic:
      kind = ReadStatus::Broken;
      limit = kMaxReasonBytes;
      break;
    case kHeartbeatMagic:
      kind = ReadStatus::Heartbeat;
      limit = 0;
      break;
    default:
      fail(error, strCat("frame with unknown magic 0x", std::hex, h.magic, std::dec));
      return ReadStatus::Invalid;
  }
  // Frames on a connection come only from the rank that authenticated on it.
  if (h.sender != expectedSender) {
    fail(error, strCat("frame claims sender rank ", h.sender, " on the connection of rank ",
                       expectedSender));
    return ReadStatus::Invalid;
  }
  // The payload length decides how many bytes are read into a slot: it must fit the slot.
  // Both bounds are plain comparisons of int64 values, no sums that could wrap.
  if (h.payloadBytes < 0 || h.payloadBytes > limit) {
    fail(error, strCat("frame announces ", h.payloadBytes, " payload bytes; at most ", limit,
                       " fit"));
    return ReadStatus::Invalid;
  }
  if (kind == ReadStatus::Data) {
    // The executor prints these fields in its mismatch errors: keep them in their ranges.
    const Fingerprint& f = h.fingerprint;
    if (h.step < 0 || f.count < 0 ||
        static_cast<size_t>(f.collective) >= static_cast<size_t>(Collective::kCount) ||
        static_cast<size_t>(f.dtype) >= static_cast<size_t>(DType::kCount) ||
        static_cast<size_t>(f.op) >= static_cast<size_t>(RedOp::kCount)) {
      fail(error, strCat("frame with out-of-range fields (step ", h.step, ", count ", f.count,
                         ", collective ", static_cast<int>(f.collective), ", dtype ",
                         static_cast<int>(f.dtype), ", op ", static_cast<int>(f.op), ")"));
      return ReadStatus::Invalid;
    }
  }
  *payloadBytes = h.payloadBytes;
  return kind;
}

ReadTarget FrameReader::target(MessageHeader* header, uint8_t* payload, uint8_t* reason) const {
  // got_ < the size of the current part always holds here (advance() moves on when a part is
  // full), so every difference below is positive and within the part's storage.
  switch (part_) {
    case Part::Header:
      return {reinterpret_cast<uint8_t*>(header) + got_,
              static_cast<size_t>(static_cast<int64_t>(sizeof(MessageHeader)) - got_)};
    case Part::Payload:
      return {payload + got_, static_cast<size_t>(partBytes_ - got_)};
    case Part::Reason:
      return {reason + got_, static_cast<size_t>(partBytes_ - got_)};
  }
  return {nullptr, 0};
}

ReadStatus FrameReader::advance(size_t n, const MessageHeader& header, std::string* error) {
  const int64_t partSize =
      part_ == Part::Header ? static_cast<int64_t>(sizeof(MessageHeader)) : partBytes_;
  // A caller that reports more than it was offered has a bug; refuse instead of walking on.
  if (n > static_cast<size_t>(partSize - got_)) {
    fail(error, strCat("internal: ", n, " bytes reported where ", partSize - got_, " were offered"));
    return ReadStatus::Invalid;
  }
  got_ += static_cast<int64_t>(n);
  if (got_ < partSize) return ReadStatus::NeedMore;
  if (part_ == Part::Header) {
    int64_t bytes = 0;
    ReadStatus kind = parseFrameHeader(header, expectedSender_, capacity_, &bytes, error);
    if (kind == ReadStatus::Invalid) return kind;
    got_ = 0;
    partBytes_ = bytes;
    if (bytes == 0) {
      part_ = Part::Header;
      return kind;
    }
    part_ = kind == ReadStatus::Broken ? Part::Reason : Part::Payload;
    pendingKind_ = kind;
    return ReadStatus::NeedMore;
  }
  // Payload or reason complete: the frame is whole. partBytes_ stays readable (reasonBytes()).
  part_ = Part::Header;
  got_ = 0;
  return pendingKind_;
}

}  // namespace ring
