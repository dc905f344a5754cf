#include "common/hmac_sha256.h"

#include <cstring>

namespace ring {

HmacSha256::HmacSha256(const void* key, size_t keyBytes) {
  // A key longer than the hash's 64-byte block is first hashed (RFC 2104, section 2); a shorter
  // one is zero-padded to the block.
  uint8_t block[64] = {0};
  if (keyBytes > sizeof block) {
    Sha256Digest d = sha256(key, keyBytes);
    std::memcpy(block, d.data(), d.size());
  } else if (keyBytes > 0) {
    std::memcpy(block, key, keyBytes);
  }
  uint8_t innerPad[64];
  for (size_t i = 0; i < sizeof block; ++i) {
    innerPad[i] = block[i] ^ 0x36;
    outerPad_[i] = block[i] ^ 0x5c;
  }
  inner_.update(innerPad, sizeof innerPad);
}

Sha256Digest HmacSha256::finish() {
  Sha256Digest innerDigest = inner_.finish();
  Sha256 outer;
  outer.update(outerPad_, sizeof outerPad_);
  outer.update(innerDigest.data(), innerDigest.size());
  return outer.finish();
}

Sha256Digest hmacSha256(const void* key, size_t keyBytes, const void* data, size_t bytes) {
  HmacSha256 h(key, keyBytes);
  h.update(data, bytes);
  return h.finish();
}

}  // namespace ring
