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

// Whether two numeric addresses are the same host address (an IPv6 scope is not compared:
// each side names the link by its own interface). False if either is not numeric.
bool sameIpAddress(const std::string& a, const std::string& b);

// What decides the address a rank listens on (from the environment: common/env.h).
struct ListenChoice {
  // TORCH_RING_SOCKET_IFNAME, else "=" + GLOO_SOCKET_IFNAME (interface_filter.h), or "".
  std::string ifnameSpec;
  // Which variable and value, for messages: "TORCH_RING_SOCKET_IFNAME='^docker'".
  std::string ifnameSource;
  // AF_INET or AF_INET6 to use only that family of the interfaces' addresses; 0: either.
  int family = 0;
  // MASTER_ADDR (IPv4, IPv6 or a name), or "".
  std::string masterAddr;
};

// The address this rank listens on, never 0.0.0.0 or :::
//   1. `ifnameSpec` non-empty: an address of an interface the spec admits (NCCL's syntax), in
//      the spec's order of names, a non-loopback interface first, IPv4 before global IPv6
//      before link-local IPv6 (with its scope, "%eth0"), only `family` if it is set;
//   2. `masterAddr` non-empty: the local address the kernel would use to reach it (a UDP
//      socket is "connected" there, which sends nothing, and asked for its name);
//   3. an address the host name resolves to, if it is not a loopback address;
//   4. 127.0.0.1.
// `why` receives which rule decided, for the INFO log.
std::string chooseListenAddress(const ListenChoice& choice, std::string* why);

}  // namespace ring
