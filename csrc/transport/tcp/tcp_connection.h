// State of one authenticated socket, owned by the I/O thread (private to the TCP transport).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/tcp/tcp_links.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/wire.h"

namespace ring {

struct TcpTransport::Connection {
  Connection(int peerRank, int ch, TcpSendLink* s, TcpRecvLink* r)
      : peer(peerRank), channel(ch), send(s), recv(r), reader(peerRank, s->capacity()) {}

  int fd = -1;
  int peer;
  int channel;
  std::string address;  // the peer's end, "10.0.0.2:41234"
  TcpSendLink* send;
  TcpRecvLink* recv;
  uint32_t interest = 0;    // epoll events registered now (0: not registered)

  // Whoever sends on the socket, touches the write state below or changes `fd` holds this: the
  // I/O thread (waiting for it) or an executor in publish() (trying once, never waiting). One
  // writer at a time keeps frames whole and in order on the stream, and the fd cannot be
  // closed under an executor's send().
  std::atomic<bool> writeLock{false};
  // Write side: frame `writeFrame` of the send link is on its way, writeOffset bytes of it out.
  uint64_t writeFrame = 0;
  size_t writeOffset = 0;
  bool writeBlocked = false;    // the socket said EAGAIN: wait for EPOLLOUT
  std::vector<uint8_t> control;  // a goodbye or broken notice, sent at the next frame boundary
  size_t controlOffset = 0;
  bool brokenSent = false;   // a broken notice is queued or out: no more data frames
  bool goodbyeSent = false;  // a goodbye is queued or out: no more data frames
  bool finSent = false;      // the goodbye is out and the write side shut down

  // Whoever reads from the socket, touches the read state below or changes `fd` holds this:
  // the I/O thread (waiting for it) or an executor in receive() (trying once, never waiting).
  // One reader at a time: the stream's bytes go to one FrameReader in order.
  std::atomic<bool> readLock{false};
  // Read side: frame `readFrame` of the receive link is being read into its slot.
  FrameReader reader;
  uint64_t readFrame = 0;
  bool readPaused = false;      // every receive slot is full: not reading the socket
  bool goodbyeReceived = false;
  // Liveness (tcp_liveness.cc), I/O thread only: bytes read by the I/O thread since its last
  // liveness pass; the receive link's frame count at that pass (frames an executor read inline
  // count too); when the last heartbeat went out, and the send link's written count then.
  bool heardSincePass = false;
  uint64_t arrivedAtPass = 0;
  Clock::time_point lastBeat{};
  uint64_t writtenAtBeat = 0;
  bool eof = false;
  uint8_t reason[kMaxReasonBytes];  // the text of a broken notice (fixed size: never from a header)
};

}  // namespace ring
