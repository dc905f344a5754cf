// What travels on a TCP link, and the pure functions that judge it. Nothing here touches a
// socket, so that the fuzz target (tests/fuzz/fuzz_wire.cc) can feed these functions arbitrary
// bytes: every byte that comes off the network passes through one of them first.
//
// A connection joins two ranks for one channel and carries frames both ways (the two
// directions of a TCP stream have independent flow control). It opens with a three-message
// handshake:
//
//   connector (lower rank)            acceptor (higher rank)
//      Hello   {nonceC}          ->
//                                <-   Reply   {nonceA, proofA}
//      Confirm {proofC}          ->
//   then frames (MessageHeader + payload) in both directions.
//
// proofX = HMAC-SHA256(key, role label || group hash || ranks || channel || slot bytes ||
//                        nonceC || nonceA):
// each side proves it holds the job's key without sending it, over nonces from both sides so
// that a recorded handshake cannot be replayed, with a role label so that one side's proof
// cannot be reflected back as the other's.
//
// The key is the job token rank 0 puts in the store; with TORCH_RING_SECRET (or _FILE) set it
// is HMAC-SHA256(secret, label || token), so that reading the store is not enough to join.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "common/hmac_sha256.h"
#include "protocol/message_header.h"

namespace ring {

constexpr uint32_t kHandshakeMagic = 0x50435452u;  // "RTCP" in memory order
// 2: the proofs became HMAC-SHA256 (version 1 hashed the token and fields with bare SHA-256).
// 3: heartbeat frames (a version-2 reader would refuse them as frames of unknown magic).
constexpr uint32_t kWireVersion = 3;
constexpr size_t kTokenBytes = 32;
constexpr size_t kNonceBytes = 32;

// Control frames share the 64-byte header layout of data frames and differ in magic.
constexpr uint32_t kGoodbyeMagic = 0x45594252u;  // "RBYE": orderly close, nothing follows
constexpr uint32_t kBrokenMagic = 0x4b524252u;   // "RBRK": the sender's group broke; reason
// "RBEA": nothing but "the sender's host, process and I/O thread are alive and the network
// between us carries bytes"; sent on a connection that has carried nothing else for a while
// (tcp_liveness.cc), so that silence means a dead host or a cut link, never an idle rank.
constexpr uint32_t kHeartbeatMagic = 0x41454252u;
// A broken notice carries at most this many reason bytes (read into a fixed buffer).
constexpr int64_t kMaxReasonBytes = 1024;

using JobToken = std::array<uint8_t, kTokenBytes>;
// What the proofs are keyed with (see above): the token itself when the job has no secret.
using HandshakeKey = std::array<uint8_t, 32>;
HandshakeKey handshakeKey(const JobToken& token, const std::string& secret);

enum class HandshakeKind : uint32_t { Hello = 1, Reply = 2, Confirm = 3 };

// Fixed size, so that a reader knows how much to read before trusting anything; all fields in
// the byte order of the hosts (little-endian is asserted in wait.cc).
struct HandshakeMsg {
  uint32_t magic;      // kHandshakeMagic: anything else is not this protocol
  uint32_t version;    // kWireVersion: both sides must run the same framing
  uint32_t kind;       // HandshakeKind: the step of the exchange this message is
  int32_t channel;     // Channel of the connection (one socket per direction and channel)
  uint64_t groupHash;  // hash of the group name: a socket of another group is refused early
  int32_t srcRank;     // the connecting rank (the sender of data frames on this socket)
  int32_t dstRank;     // the accepting rank
  int64_t slotBytes;   // payload capacity: the receiver's slots must hold the sender's frames
  uint8_t connectorNonce[kNonceBytes];  // fresh random bytes of the connector (all messages)
  uint8_t acceptorNonce[kNonceBytes];   // fresh random bytes of the acceptor (zero in Hello)
  uint8_t proof[32];                    // proof of the key (zero in Hello)
};
static_assert(sizeof(HandshakeMsg) == 136, "fixed wire size");
static_assert(std::is_trivially_copyable<HandshakeMsg>::value, "sent as bytes");

// What the acceptor knows before it reads a Hello.
struct HelloExpectations {
  uint64_t groupHash;
  int myRank;
  int groupSize;
  int64_t slotBytes;
};

// Decodes exactly sizeof(HandshakeMsg) bytes and checks magic, version and kind; nothing else
// is trusted yet. Returns false with a reason in *error.
bool parseHandshake(const uint8_t* data, size_t n, HandshakeKind expectedKind, HandshakeMsg* out,
                    std::string* error);

// Acceptor: checks a parsed Hello against this rank (group, destination, source range and
// direction, channel, slot size). Whether the source is still expected is the caller's check.
bool checkHello(const HandshakeMsg& hello, const HelloExpectations& e, std::string* error);

// Connector: checks the acceptor's Reply against the Hello it sent, including proofA.
bool checkReply(const HandshakeMsg& reply, const HandshakeMsg& hello, const HandshakeKey& key,
                std::string* error);

// Acceptor: checks the connector's Confirm against the Hello and Reply, including proofC.
bool checkConfirm(const HandshakeMsg& confirm, const HandshakeMsg& reply,
                  const HandshakeKey& key, std::string* error);

enum class ProofRole { Acceptor, Connector };
// The proof of `role` over the fields of `m` (which must hold both nonces).
Sha256Digest handshakeProof(const HandshakeKey& key, ProofRole role, const HandshakeMsg& m);

// Compares in time independent of where the bytes differ.
bool constantTimeEqual(const uint8_t* a, const uint8_t* b, size_t n);

uint64_t groupNameHash(const std::string& groupName);

// ---- frames ---------------------------------------------------------------------------------

enum class ReadStatus { NeedMore, Data, Goodbye, Broken, Heartbeat, Invalid };

// Checks one received 64-byte header: its kind by magic, the sender, and every length against
// the capacity that will hold the payload (no arithmetic that can overflow). On success
// *payloadBytes is the number of bytes that follow.
ReadStatus parseFrameHeader(const MessageHeader& h, int expectedSender, int64_t capacity,
                            int64_t* payloadBytes, std::string* error);

// Where the next bytes of a frame go, and at most how many.
struct ReadTarget {
  uint8_t* dst;
  size_t bytes;
};

// Reassembles frames from a byte stream that arrives in arbitrary pieces, into caller-owned
// storage: a header, a payload area of `capacity` bytes, and a reason area of kMaxReasonBytes.
// It never asks for more bytes than the part of the frame it is in has left, so a read into
// target() can never write past the storage, whatever the peer sends.
class FrameReader {
 public:
  FrameReader(int expectedSender, int64_t capacity)
      : expectedSender_(expectedSender), capacity_(capacity) {}

  ReadTarget target(MessageHeader* header, uint8_t* payload, uint8_t* reason) const;
  // Accounts for n bytes written at the last target (n <= its bytes). Returns NeedMore until a
  // frame is complete, then its kind; Invalid with *error when the header is refused. After a
  // complete frame the next call to target() starts the next frame.
  ReadStatus advance(size_t n, const MessageHeader& header, std::string* error);
  // Reason bytes of the last Broken frame.
  int64_t reasonBytes() const { return partBytes_; }
  // True between frames (nothing of the next frame read yet).
  bool atBoundary() const { return part_ == Part::Header && got_ == 0; }
  // True inside the payload of a data frame whose header was accepted.
  bool inDataPayload() const {
    return part_ == Part::Payload && pendingKind_ == ReadStatus::Data;
  }

 private:
  enum class Part { Header, Payload, Reason };
  int expectedSender_;
  int64_t capacity_;
  Part part_ = Part::Header;
  int64_t got_ = 0;        // bytes of the current part received
  int64_t partBytes_ = 0;  // size of the current payload or reason part
  ReadStatus pendingKind_ = ReadStatus::Data;
};

}  // namespace ring
