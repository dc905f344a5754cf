// SHA-256 against the FIPS 180-4 / NIST example vectors, and incremental hashing against
// one-shot hashing at every split point (the handshake hashes its transcript in pieces).
#include <gtest/gtest.h>

#include <string>

#include "common/sha256.h"

namespace ring {
namespace {

std::string hexOf(const std::string& s) {
  Sha256Digest d = sha256(s.data(), s.size());
  return toHex(d.data(), d.size());
}

TEST(Sha256, NistShortVectors) {
  EXPECT_EQ(hexOf(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hexOf("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hexOf("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hexOf("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                  "klmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, OneMillionA) {
  EXPECT_EQ(hexOf(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the padding boundary (55, 56, 63, 64 bytes) take one or two final blocks.
TEST(Sha256, IncrementalEqualsOneShotAtEverySplit) {
  for (size_t len : {0u, 1u, 55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u, 200u}) {
    std::string msg;
    for (size_t i = 0; i < len; ++i) msg += static_cast<char>('a' + i % 26);
    Sha256Digest whole = sha256(msg.data(), msg.size());
    for (size_t cut = 0; cut <= len; ++cut) {
      Sha256 h;
      h.update(msg.data(), cut);
      h.update(msg.data() + cut, len - cut);
      EXPECT_EQ(h.finish(), whole) << "length " << len << " split at " << cut;
    }
  }
}

}  // namespace
}  // namespace ring
