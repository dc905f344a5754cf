// SHA-256 (FIPS 180-4), for the TCP handshake's proof of the job token. Small and dependency
// free on purpose: the core library links no crypto library, and hashing a few hundred bytes
// per connection needs no speed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ring {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  // Pads and returns the digest; the object must not be updated afterwards.
  Sha256Digest finish();

 private:
  void compress(const uint8_t* block);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t totalBytes_ = 0;
};

Sha256Digest sha256(const void* data, size_t bytes);
// Lower-case hex, for tests and logs.
std::string toHex(const uint8_t* data, size_t bytes);

}  // namespace ring
