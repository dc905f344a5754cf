// Who the others wait for: from when each rank issued each collective (Transport::issueTimes),
// every rank's lateness in it - its issue time minus the earliest rank's - kept for the
// group's last collectives, and summarized per rank. No backend reports this; a user sees
// only that a collective took long, not that the same rank arrives late in every step (a slow
// data loader, a straggling GPU, a rank doing extra work).
//
// Why issue times and not receive times: on a ring each rank hears only from its left
// neighbour, and a late rank delays everyone behind it, so the first message's wait blames the
// neighbour. The issue time is each rank's own, on one clock for the ranks of a host.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ring {

struct StragglerRank {
  int rank = 0;
  uint64_t lastIn = 0;     // collectives in which it issued last (ties: none counted)
  double medianMs = 0;     // its lateness over the kept collectives
  double p90Ms = 0;
  double maxMs = 0;
};

struct StragglerReport {
  uint64_t collectives = 0;           // kept collectives the report covers
  double thresholdMs = 0;
  std::vector<StragglerRank> ranks;   // every rank, by rank
  std::vector<int> stragglers;        // ranks whose median lateness is at least thresholdMs
  // The group's first failed collective on this rank and its error ("all_reduce #57: ring:
  // rank 0 cannot continue: rank 2 ... has sent nothing for 5.0 s ..."), filled in by the
  // backend from its flight recorder; empty while none failed. A rank that is gone (a dead or
  // frozen host) issues nothing more, so lateness alone would never name it.
  std::string failure;
  // "rank 3 was late in 29 of 30 collectives: by 20.1 ms (median), 20.4 ms (p90)", or
  // "no rank was late by 1 ms or more (median) in the last 30 collectives"; then, after a
  // failure, "; the group failed at <failure>".
  std::string describe() const;

 private:
  std::string lateness() const;
};

class StragglerStats {
 public:
  // Keeps the latenesses of the last `window` collectives.
  StragglerStats(int size, size_t window = 512);
  // The issue times (ns, one clock) of one collective, by rank.
  void add(const std::vector<int64_t>& issuedNs);
  StragglerReport report(double thresholdMs) const;
  uint64_t added() const;

 private:
  const int size_;
  const size_t window_;
  mutable std::mutex mutex_;
  // The kept collectives in a ring of `window_` rows, overwritten oldest first: add() runs on
  // every collective of a rank's caller or worker thread, and a row made and freed per call
  // (with a deque's blocks) was a few hundred instructions of a small call's bookkeeping.
  std::vector<double> lateMs_;  // row c (collective), column r (rank): size_ per row
  std::vector<int> last_;       // per row: the rank that issued last, or -1 (a tie)
  size_t kept_ = 0;             // rows in use: min(added_, window_)
  uint64_t added_ = 0;          // row (added_ % window_) is the next to write
};

class Transport;

// What a rank does with the issue times after its announcements (Communicator::announceIssued):
// reads those of the earlier collectives that every rank has issued from the transport, in
// order, into its StragglerStats, and on rank 0 logs the report every
// TORCH_RING_STRAGGLER_LOG_S seconds.
//
// Why in batches of kBatch collectives, not after each: the times are read by every call of a
// program that calls in a loop, and reading one collective's (a lock, the peers' entries, the
// clock for the log) was over one percent of a 4 KiB all_reduce's instructions on its caller's
// thread (docs/notes/code_comment_figures.md); a report reads what the batch has not
// (report), so it is as fresh.
// The transport keeps kIssueHistory (64) times per rank: a batch of 16 stays well inside them.
class IssueTimes {
 public:
  static constexpr uint64_t kBatch = 16;

  IssueTimes(int rank, int size) : rank_(rank), stats_(size) {}
  // This rank has just announced `count` collectives on `t` (which announces), on its issuing
  // thread: reads the times once kBatch collectives are unread.
  void collect(Transport& t, uint64_t count) {
    // Relaxed: a stale value only makes this call read (and find nothing) or leave it to the next.
    if (count >= next_.load(std::memory_order_relaxed) + kBatch) read(t, count);
  }
  // Reads the times of every collective that every rank has issued so far (any thread; for a
  // report), then the report.
  StragglerReport report(Transport& t, double thresholdMs);

 private:
  // Reads the times of collectives next_ .. count-1, as far as every rank has issued them.
  void read(Transport& t, uint64_t count);

  const int rank_;
  StragglerStats stats_;
  std::mutex mutex_;                   // read()'s: the issuing thread and a report's
  std::atomic<uint64_t> next_{0};      // the next collective whose times to read
  std::vector<int64_t> scratch_;       // under mutex_
  std::chrono::steady_clock::time_point lastLog_ = std::chrono::steady_clock::now();
};

}  // namespace ring
