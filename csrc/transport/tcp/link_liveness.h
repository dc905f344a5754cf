// When this rank last heard from each peer it reaches over TCP, and which peers have been silent
// for longer than the bound (TORCH_RING_LINK_SILENCE_MS).
//
// Why silence, and not the group timeout or the kernel's keepalive: a collective's wait cannot
// tell a peer that is late (checkpointing, a long step, a slow data loader) from one whose host
// is gone, and the timeout is often many minutes; the kernel of a frozen host (every process
// stopped, a hung user space) still acknowledges keepalive probes. So every rank's TCP I/O
// thread, which runs whatever the rank's Python code does, sends a heartbeat on each connection
// that has carried nothing else for kHeartbeatEvery (tcp_liveness.cc). A peer whose process
// lives is then never silent for long, however late it is to a collective; one silent past the
// bound is dead, frozen, or cut off by the network.
//
// Pure bookkeeping over times it is given, so that tests can drive it with any clock; the I/O
// thread is its only user.
#pragma once

#include <chrono>
#include <vector>

#include "transport/wait.h"

namespace ring {

// How often an idle connection carries a heartbeat.
constexpr std::chrono::milliseconds kHeartbeatEvery{250};
// The shortest bound that makes sense (env.cc refuses shorter ones): four heartbeats, so that
// one delayed by a busy core or a TCP retransmission does not condemn a live peer.
constexpr std::chrono::milliseconds kShortestSilenceBound{1000};

class LinkLiveness {
 public:
  // `bound` 0: no peer is ever judged silent.
  LinkLiveness(int size, std::chrono::milliseconds bound);

  std::chrono::milliseconds bound() const { return bound_; }

  // Starts judging `peer` (its first connection is up), as heard at `now`.
  void watch(int peer, Clock::time_point now);
  // Stops judging `peer`: it said goodbye, or its connections have ended otherwise.
  void forget(int peer);
  // Something came from `peer`: a frame, or bytes of one; or this rank holds its frames unread
  // (every receive slot full), so that it is not waiting for it.
  void heard(int peer, Clock::time_point now);

  // The watching thread calls this first in each of its passes. A thread that itself did not
  // run for longer than a quarter of the bound (a starved core, a suspended machine) could not
  // listen meanwhile: the silence of every peer is counted from now, rather than blamed on
  // them.
  void passBegins(Clock::time_point now);

  // The watched peers silent for longer than the bound at `now`, in rank order.
  std::vector<int> silent(Clock::time_point now) const;
  // How long `peer` has been silent at `now`.
  Clock::duration silentFor(int peer, Clock::time_point now) const;

 private:
  std::chrono::milliseconds bound_;
  std::vector<char> watched_;                 // [rank]
  std::vector<Clock::time_point> lastHeard_;  // [rank]
  Clock::time_point lastPass_{};
  bool passed_ = false;
};

}  // namespace ring
