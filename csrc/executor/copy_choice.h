// Whether a call's copies into shared memory stream past the cache (transport/streaming_copy.h)
// or go through it, chosen by timing both on the group's own calls.
//
// Why measure instead of fixing one: which is faster depends on where the host put the cores
// relative to each other, and that moves under a running job. Where the two ranks' cores share
// no cache, a cached copy fetches every line back from the peer's cache before writing it, and
// streaming was the faster from 128 KiB up; where they share a
// cache, lines move between the cores through it, and the streamed copy's detour through memory
// may cost instead (docs/notes/benchmarks_deepspeed.md, "Streaming stores"). Either is correct: the
// choice changes how this rank writes, never what.
//
// How: calls are sorted by size into power-of-two classes from 4 KiB (below, nothing streams).
// In every class, of every kPeriod calls, kTrials stream and kTrials do not, by the call's
// place in its class alone, which is the same on every rank (every rank issues the same calls),
// so the ranks time the same calls done the same way; the rest follow the method whose fastest
// trial took less time per byte. The fastest of a few, because a trial's time includes waiting
// for a late peer, which only adds. Costs: kTrials / kPeriod of a class's calls done the slower
// way (0.6%). A class's first kFirstTrial calls, before any trial, follow the group's start
// method (startWith): the first calls of a size touch fresh buffers and a cold cache, no measure
// of the copy. The start is read from the machine at set-up (executor/group_setup.h,
// chooseCopyStart: cached where this host's ranks share one last-level cache, streamed
// elsewhere), so a short benchmark, or a job whose sizes vary and never reaches a class's
// trials, copies the way the cores are laid out from its first call.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace ring {

class CopyChoice {
 public:
  static constexpr int kClasses = 16;            // 4 KiB, 8 KiB, ... 128 MiB and up
  static constexpr uint64_t kPeriod = 512;        // calls of a class between two trials' starts
  static constexpr uint64_t kFirstTrial = 64;     // a period's first trial call
  static constexpr uint64_t kTrials = 3;          // calls of each method per period

  // One call's choice: whether it streams, and what record() needs to know of it.
  struct Call {
    bool streams = true;
    int sizeClass = -1;  // -1: below 4 KiB, nothing to choose or record
    bool trial = false;
  };

  // Before any call: the method every class follows until its trials decide (default: streamed).
  void startWith(bool streams);
  bool startsStreamed() const;
  // The choice for the next call of `bytes` (issue order: every rank asks for the same calls).
  Call next(int64_t bytes);
  // A call done as chosen took `micros` for `bytes`: only trials count.
  void record(const Call& call, int64_t bytes, double micros);
  // The method the non-trial calls of `bytes`' class follow now, and how many trials of that
  // class have been timed so far (tests, logs).
  bool streamsNow(int64_t bytes) const;
  uint64_t trialsTimed(int64_t bytes) const;

  static int sizeClassOf(int64_t bytes);

 private:
  struct SizeClass {
    uint64_t calls = 0;
    bool streams = true;
    // Per method (0: cached, 1: streamed): the fastest trial's microseconds per byte, and the
    // trials recorded since the last decision.
    std::array<double, 2> best{};
    std::array<uint64_t, 2> timed{};
    uint64_t timedInAll = 0;
  };
  mutable std::mutex mutex_;  // next() on the issuing thread, record() on the one that ran it
  std::array<SizeClass, kClasses> classes_{};
  bool start_ = true;
};

}  // namespace ring
