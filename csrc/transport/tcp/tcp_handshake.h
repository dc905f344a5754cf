// Both sides of the connection handshake (the messages and checks are in wire.h).
//
// The connector runs it blocking, from the set-up thread, before it hands the socket to the
// I/O thread. The acceptor runs it as a small non-blocking state machine inside the I/O thread,
// so that a stranger that connects and then says nothing holds a pending slot (capped) until
// its deadline, never a thread.
#pragma once

#include <functional>
#include <string>

#include "transport/tcp/wire.h"
#include "transport/wait.h"

namespace ring {

// What this rank proves and checks in every handshake.
struct HandshakeIdentity {
  uint64_t groupHash = 0;
  int rank = 0;
  int groupSize = 0;
  int64_t slotBytes = 0;
  // The token, or the token keyed with the job's secret (wire.h, handshakeKey).
  HandshakeKey key{};
};

enum class ConnectOutcome {
  Authenticated,
  // The acceptor closed the socket before its Reply (it refused us, or dropped a pending
  // handshake to stay under its cap): worth another try.
  ClosedEarly,
};

// Connector side on a connected socket. Throws CommError if the acceptor fails to prove the
// token or the deadline passes; *detail says why for ClosedEarly.
ConnectOutcome authenticateAsConnector(int fd, const HandshakeIdentity& me, int peer, int channel,
                                       Clock::time_point deadline, std::string* detail);

class PendingHandshake {
 public:
  enum class Step { NeedMore, Authenticated, Rejected };
  // Is (peer, channel) a connection this rank still expects? Fills the reason if not.
  using Admit = std::function<bool(int peer, int channel, std::string* why)>;

  PendingHandshake(int fd, std::string address, Clock::time_point deadline)
      : fd_(fd), address_(std::move(address)), deadline_(deadline) {}

  // Reads what the socket has (never past the current message), answers a valid Hello with a
  // Reply, and judges the Confirm. Rejected: *error says why; the caller closes the socket.
  Step onReadable(const HandshakeIdentity& me, const Admit& admit, std::string* error);

  int fd() const { return fd_; }
  const std::string& address() const { return address_; }
  Clock::time_point deadline() const { return deadline_; }
  int peer() const { return hello_.srcRank; }
  int channel() const { return hello_.channel; }

 private:
  int fd_;
  std::string address_;
  Clock::time_point deadline_;
  bool helloDone_ = false;
  uint8_t buffer_[sizeof(HandshakeMsg)];
  size_t got_ = 0;
  HandshakeMsg hello_{};
  HandshakeMsg reply_{};
};

}  // namespace ring
