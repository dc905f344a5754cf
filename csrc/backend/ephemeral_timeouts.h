// torch 2.15's Backend::addEphemeralTimeout, as its documentation and NCCL define it: an
// extension added now lengthens the timeout of every call the group creates from now on, until
// the first of those calls ends; several accumulate, each expiring on its own. Why: a job that
// knows its next step will be slow (a checkpoint, a first compilation) says so without raising
// the group's timeout for good. Torch-free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ring {

class EphemeralTimeouts {
 public:
  // `nextSeq`: the sequence number the group's next call will get; the extension ends with it.
  void add(std::chrono::milliseconds extra, uint64_t nextSeq);
  // What every call created now adds to its timeout. Inline: every call asks, and the answer is
  // almost always "nothing", which one load tells.
  std::chrono::milliseconds extra() const {
    if (!active_.load(std::memory_order_acquire)) return std::chrono::milliseconds(0);
    return extraSlow();
  }
  // A call of the group ended (sequence numbers of collectives; a point-to-point call ends no
  // extension).
  void ended(uint64_t seq) {
    if (active_.load(std::memory_order_acquire)) endedSlow(seq);
  }

 private:
  std::chrono::milliseconds extraSlow() const;
  void endedSlow(uint64_t seq);

  struct Extension {
    std::chrono::milliseconds extra;
    uint64_t endsWith;  // the sequence number of the first call created after add()
  };
  mutable std::mutex mutex_;
  std::vector<Extension> live_;     // guarded by mutex_
  std::atomic<bool> active_{false};  // !live_.empty(), for the lock-free fast paths
};

}  // namespace ring
