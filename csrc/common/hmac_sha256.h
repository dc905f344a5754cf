// HMAC-SHA256 (RFC 2104, tested with RFC 4231's vectors): the keyed proof of the TCP handshake.
// Why a MAC and not a bare hash over key || message: a bare SHA-256 of a secret prefix is open
// to length extension, and reviewers rightly expect the standard construction.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/sha256.h"

namespace ring {

class HmacSha256 {
 public:
  HmacSha256(const void* key, size_t keyBytes);
  void update(const void* data, size_t bytes) { inner_.update(data, bytes); }
  // The tag; the object must not be updated afterwards.
  Sha256Digest finish();

 private:
  Sha256 inner_;
  uint8_t outerPad_[64];
};

Sha256Digest hmacSha256(const void* key, size_t keyBytes, const void* data, size_t bytes);

}  // namespace ring
