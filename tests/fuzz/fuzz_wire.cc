// libFuzzer target for every function that judges bytes from the network (wire.h): handshake
// parsing and checks, frame-header parsing, and the frame reader fed in arbitrary pieces.
// Built with AddressSanitizer and UBSan (scripts/fuzz.sh): any read or write outside the
// storage the reader was given, any overflow, crashes the run.
//
// Input layout: byte 0 picks the target; the rest is its input.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "transport/tcp/wire.h"

namespace {

using namespace ring;

JobToken fixedToken() {
  JobToken t{};
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint8_t>(i * 3 + 1);
  return t;
}

// Handshake: parse the bytes as each kind, and run the check that kind meets in real life.
void fuzzHandshake(const uint8_t* data, size_t size) {
  static const JobToken token = fixedToken();
  HandshakeMsg hello{};
  hello.magic = kHandshakeMagic;
  hello.version = kWireVersion;
  hello.kind = static_cast<uint32_t>(HandshakeKind::Hello);
  hello.groupHash = groupNameHash("fuzz");
  hello.srcRank = 1;
  hello.dstRank = 2;
  hello.slotBytes = 4096;
  HelloExpectations expect{hello.groupHash, 2, 4, 4096};
  // The input may be shorter or longer than a message: parse what a reader would have.
  std::vector<uint8_t> exact(data, data + size);
  std::string error;
  HandshakeMsg m;
  for (HandshakeKind k : {HandshakeKind::Hello, HandshakeKind::Reply, HandshakeKind::Confirm}) {
    if (!parseHandshake(exact.data(), exact.size(), k, &m, &error)) continue;
    switch (k) {
      case HandshakeKind::Hello:
        checkHello(m, expect, &error);
        break;
      case HandshakeKind::Reply:
        checkReply(m, hello, token, &error);
        break;
      case HandshakeKind::Confirm: {
        HandshakeMsg reply = m;  // pretend we sent the nonce it echoes
        checkConfirm(m, reply, token, &error);
        break;
      }
    }
  }
}

// Frames: a capacity from the first two bytes, piece sizes from the next ones, then the stream.
void fuzzFrames(const uint8_t* data, size_t size) {
  if (size < 4) return;
  const int64_t capacity = (data[0] | data[1] << 8) % 5000;
  const uint8_t pieceSeed = data[2];
  const int sender = data[3] % 4;
  data += 4;
  size -= 4;
  // Exactly sized heap buffers: one byte past them is a sanitizer error.
  std::vector<uint8_t> payload(static_cast<size_t>(capacity));
  std::vector<uint8_t> reason(static_cast<size_t>(kMaxReasonBytes));
  MessageHeader* header = new MessageHeader;
  FrameReader reader(sender, capacity);
  size_t at = 0, round = 0;
  while (at < size) {
    ReadTarget t = reader.target(header, payload.data(), reason.data());
    size_t piece = 1 + (pieceSeed * (round + 7) % 97);
    size_t n = t.bytes < piece ? t.bytes : piece;
    if (n > size - at) n = size - at;
    if (n > 0) std::memcpy(t.dst, data + at, n);
    at += n;
    ++round;
    std::string error;
    ReadStatus s = reader.advance(n, *header, &error);
    if (s == ReadStatus::Invalid) break;
    if (s == ReadStatus::Data) {
      // What the executor then reads: header fields and payloadBytes of the slot.
      volatile uint8_t sink = 0;
      for (int64_t i = 0; i < header->payloadBytes; ++i) sink = sink ^ payload[static_cast<size_t>(i)];
      (void)describe(header->fingerprint);
    }
    if (s == ReadStatus::Broken) {
      std::string text(reinterpret_cast<const char*>(reason.data()),
                       static_cast<size_t>(reader.reasonBytes()));
    }
  }
  delete header;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) {
    fuzzHandshake(data + 1, size - 1);
  } else {
    fuzzFrames(data + 1, size - 1);
  }
  return 0;
}
