// Thin, checked wrappers over the socket calls the TCP transport needs during set-up: choosing
// the address to listen on, listening, connecting, and reading or writing a fixed number of
// bytes before a deadline. The I/O thread's non-blocking traffic does not go through here.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "transport/wait.h"

namespace ring {

// The IPv4 address this rank listens on, never 0.0.0.0:
//   1. `ifname` non-empty (TORCH_RING_SOCKET_IFNAME): that interface's IPv4 address;
//   2. `masterAddr` non-empty (MASTER_ADDR): the local address the kernel would use to reach
//      it (a UDP socket is "connected" there, which sends nothing, and asked for its name);
//   3. the address the host name resolves to, if it is not a loopback address;
//   4. 127.0.0.1.
// `why` receives which rule decided, for the INFO log.
std::string chooseListenAddress(const std::string& ifname, const std::string& masterAddr,
                                std::string* why);

// A non-blocking listening socket on ip:0; *port receives the port the kernel chose.
int listenOn(const std::string& ip, int* port);

// Connects to ip:port, retrying while the listener is not there yet, until `deadline`.
// Returns a blocking-free (O_NONBLOCK) socket with TCP_NODELAY. `beforeRetry` runs before each
// new try and may throw to give up early (e.g. another rank reported that its set-up failed).
int connectTo(const std::string& ip, int port, Clock::time_point deadline,
              const std::function<void()>& beforeRetry = {});

// Reads/writes exactly `bytes` on a non-blocking socket, waiting with poll() until `deadline`.
// Returns 0 on success, or an errno value (ETIMEDOUT at the deadline, ECONNRESET when the peer
// closed before all bytes came).
int readFull(int fd, void* data, size_t bytes, Clock::time_point deadline);
int writeFull(int fd, const void* data, size_t bytes, Clock::time_point deadline);

void setNonBlocking(int fd);
void setNoDelay(int fd);
// "10.0.0.2:41234" of the remote end, or "?" if unknown.
std::string peerAddress(int fd);
// Splits "ip:port"; throws CommError naming `what` if malformed.
void splitHostPort(const std::string& s, const std::string& what, std::string* ip, int* port);

// Cryptographically random bytes from the kernel (getrandom).
void fillRandom(void* data, size_t bytes);

}  // namespace ring
