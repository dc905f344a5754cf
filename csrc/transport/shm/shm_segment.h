// One POSIX shared-memory segment: created 0600 under an unpredictable name by its owner,
// opened by the peers, and unlinked as soon as every rank has mapped it, so that nothing is
// left in /dev/shm whatever happens to the processes afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ring {

// The free space of /dev/shm in bytes (what a new segment may take); -1 when it cannot be read.
int64_t shmFreeBytes();

class ShmSegment {
 public:
  // Creates a fresh segment of `bytes` (zero-filled) with a random name. Its pages are
  // allocated here (posix_fallocate); with preferredNode >= 0 the calling thread prefers that
  // NUMA node while they are (set_mempolicy's MPOL_PREFERRED, so another node where that one
  // is full), and *placement, if given, says what came of it ("" where no node was asked).
  static ShmSegment create(size_t bytes, int preferredNode = -1,
                           std::string* placement = nullptr);
  // Maps an existing segment created by a peer; checks its size.
  static ShmSegment open(const std::string& name, size_t bytes);

  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  // Removes the name (the mapping stays valid). Idempotent.
  void unlink();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;
  bool linked_ = false;
};

}  // namespace ring
