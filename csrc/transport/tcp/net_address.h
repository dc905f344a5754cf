// Numeric socket addresses, IPv4 and IPv6 alike, and the choice of the address a rank listens
// on. Addresses travel through the store as text: "10.0.0.2:41234" or "[fd00::2]:41234".
#pragma once

#include <sys/socket.h>

#include <string>

namespace ring {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// Parses a numeric address ("10.0.0.2", "fd00::2", "fe80::1%eth0") with a port. No name
// look-ups: false if `ip` is not numeric.
bool parseNumericAddress(const std::string& ip, int port, SocketAddress* out);

// The address part of `sa` as text ("10.0.0.2", "fd00::2", "fe80::1%eth0"), "?" if unknown.
std::string formatIp(const sockaddr* sa, socklen_t length);
// "10.0.0.2:41234" or "[fd00::2]:41234".
std::string joinHostPort(const std::string& ip, int port);
// The inverse of joinHostPort; throws CommError naming `what` if `s` is malformed.
void splitHostPort(const std::string& s, const std::string& what, std::string* ip, int* port);

// The address this rank listens on, never 0.0.0.0 or :::
//   1. `ifname` non-empty (TORCH_RING_SOCKET_IFNAME): that interface's IPv4 address, else its
//      global IPv6 address, else its link-local IPv6 address (with its scope, "%eth0");
//   2. `masterAddr` non-empty (MASTER_ADDR, IPv4, IPv6 or a name): the local address the kernel
//      would use to reach it (a UDP socket is "connected" there, which sends nothing, and asked
//      for its name);
//   3. an address the host name resolves to, if it is not a loopback address;
//   4. 127.0.0.1.
// `why` receives which rule decided, for the INFO log.
std::string chooseListenAddress(const std::string& ifname, const std::string& masterAddr,
                                std::string* why);

}  // namespace ring
