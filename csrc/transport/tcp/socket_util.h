// Thin, checked wrappers over the socket calls the TCP transport needs during set-up: listening,
// connecting, and reading or writing a fixed number of bytes before a deadline (addresses and
// the choice of the one to listen on: net_address.h). The I/O thread's non-blocking traffic does
// not go through here.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "transport/tcp/net_address.h"
#include "transport/wait.h"

namespace ring {

// A non-blocking listening socket on ip:0 (IPv4 or IPv6); *port receives the port the kernel
// chose.
int listenOn(const std::string& ip, int* port);

// Connects to ip:port, retrying while the listener is not there yet, until `deadline`.
// Returns a blocking-free (O_NONBLOCK) socket with TCP_NODELAY. `beforeRetry` runs before each
// new try and may throw to give up early (e.g. another rank reported that its set-up failed).
// `fromIp`, if not empty, is bound as the source address (port chosen by the kernel), so that
// the peer sees the connection come from the address this rank published.
int connectTo(const std::string& ip, int port, Clock::time_point deadline,
              const std::function<void()>& beforeRetry = {}, const std::string& fromIp = "");

// Reads/writes exactly `bytes` on a non-blocking socket, waiting with poll() until `deadline`.
// Returns 0 on success, or an errno value (ETIMEDOUT at the deadline, ECONNRESET when the peer
// closed before all bytes came).
int readFull(int fd, void* data, size_t bytes, Clock::time_point deadline);
int writeFull(int fd, const void* data, size_t bytes, Clock::time_point deadline);

void setNonBlocking(int fd);
void setNoDelay(int fd);
// "10.0.0.2:41234" or "[fd00::2]:41234" of the remote end, or "?" if unknown.
std::string peerAddress(int fd);

// Cryptographically random bytes from the kernel (getrandom).
void fillRandom(void* data, size_t bytes);

}  // namespace ring
