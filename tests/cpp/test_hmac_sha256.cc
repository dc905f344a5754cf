// HMAC-SHA256 against the seven test cases of RFC 4231 (section 4), which cover a key shorter
// than the block, a key longer than the block (hashed first), and data longer than the block;
// and incremental updates against one call.
#include <gtest/gtest.h>

#include <string>

#include "common/hmac_sha256.h"

namespace ring {
namespace {

std::string tagHex(const std::string& key, const std::string& data) {
  Sha256Digest d = hmacSha256(key.data(), key.size(), data.data(), data.size());
  return toHex(d.data(), d.size());
}

std::string bytesFrom(int first, int count) {
  std::string s;
  for (int i = 0; i < count; ++i) s += static_cast<char>(first + i);
  return s;
}

TEST(HmacSha256, Rfc4231TestCases) {
  // 1: a 20-byte key.
  EXPECT_EQ(tagHex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // 2: a key shorter than the output.
  EXPECT_EQ(tagHex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // 3: 50 bytes of data, 20 bytes of key.
  EXPECT_EQ(tagHex(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // 4: a 25-byte key 0x01..0x19.
  EXPECT_EQ(tagHex(bytesFrom(1, 25), std::string(50, '\xcd')),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // 5: the RFC gives only the first 128 bits (truncated output).
  EXPECT_EQ(tagHex(std::string(20, '\x0c'), "Test With Truncation").substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
  // 6: a 131-byte key, longer than the 64-byte block: hashed first.
  EXPECT_EQ(tagHex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  // 7: a long key and data longer than the block.
  EXPECT_EQ(tagHex(std::string(131, '\xaa'),
                   "This is a test using a larger than block-size key and a larger than "
                   "block-size data. The key needs to be hashed before being used by the HMAC "
                   "algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256, IncrementalEqualsOneCall) {
  const std::string key = "torch_ring key";
  std::string msg;
  for (int i = 0; i < 150; ++i) msg += static_cast<char>('a' + i % 26);
  Sha256Digest whole = hmacSha256(key.data(), key.size(), msg.data(), msg.size());
  for (size_t cut : {0u, 1u, 63u, 64u, 65u, 149u, 150u}) {
    HmacSha256 h(key.data(), key.size());
    h.update(msg.data(), cut);
    h.update(msg.data() + cut, msg.size() - cut);
    EXPECT_EQ(h.finish(), whole) << "split at " << cut;
  }
}

}  // namespace
}  // namespace ring
