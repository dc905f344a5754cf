#include "transport/tcp/net_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "common/errors.h"
#include "transport/tcp/interface_filter.h"

namespace ring {
namespace {

bool isLoopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  }
  return sa->sa_family == AF_INET6 &&
         IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
}

bool isUnspecified(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  return sa->sa_family != AF_INET6 ||
         IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
}

bool isLinkLocal6(const sockaddr* sa) {
  return sa->sa_family == AF_INET6 &&
         IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
}

socklen_t lengthOf(const sockaddr* sa) {
  return sa->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

// Every address `host` (a name or a number) resolves to, in the resolver's order.
std::vector<SocketAddress> resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  std::vector<SocketAddress> out;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    SocketAddress s;
    std::memcpy(&s.storage, a->ai_addr, a->ai_addrlen);
    s.length = a->ai_addrlen;
    out.push_back(s);
  }
  freeaddrinfo(res);
  return out;
}

// The address to listen on among the interfaces `filter` admits. Preference: the filter's
// order of names, then a non-loopback interface (so that "^docker" does not pick lo, which
// other hosts cannot reach), then IPv4 over a global IPv6 address over a link-local one
// (usable with its scope), then the system's order of interfaces.
std::string interfaceAddress(const ListenChoice& choice, std::string* chosenInterface) {
  const std::string& source = choice.ifnameSource;
  InterfaceFilter filter = InterfaceFilter::parse(choice.ifnameSpec, source);
  ifaddrs* list = nullptr;
  RING_SYSCHECK(getifaddrs(&list), "listing network interfaces for ", source);
  struct Candidate {
    size_t listed;
    bool loopback;
    int family;
    size_t order;
    std::string ip, name;
    bool operator<(const Candidate& o) const {
      return std::tie(listed, loopback, family, order) <
             std::tie(o.listed, o.loopback, o.family, o.order);
    }
  };
  std::vector<Candidate> candidates;
  std::string seen;
  size_t order = 0;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next, ++order) {
    const sockaddr* sa = i->ifa_addr;
    if (sa == nullptr || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) continue;
    std::string ip = formatIp(sa, lengthOf(sa));
    seen += strCat(seen.empty() ? "" : ", ", i->ifa_name, " (", ip, ")");
    if (!filter.matches(i->ifa_name)) continue;
    if (choice.family != 0 && sa->sa_family != choice.family) continue;
    int family = sa->sa_family == AF_INET ? 0 : isLinkLocal6(sa) ? 2 : 1;
    candidates.push_back(
        {filter.preference(i->ifa_name), isLoopback(sa), family, order, ip, i->ifa_name});
  }
  freeifaddrs(list);
  if (candidates.empty()) {
    const char* wanted = choice.family == AF_INET    ? "an IPv4 address (TORCH_RING_SOCKET_FAMILY)"
                         : choice.family == AF_INET6 ? "an IPv6 address (TORCH_RING_SOCKET_FAMILY)"
                                                     : "an IPv4 or IPv6 address";
    throw UsageError(strCat(source, " matches no interface with ", wanted, "; interfaces here: ",
                            seen.empty() ? "none" : seen));
  }
  const Candidate& best = *std::min_element(candidates.begin(), candidates.end());
  *chosenInterface = best.name;
  return best.ip;
}

// The UDP "connect" only sets the default destination: no packet leaves the host, but the
// kernel picks the source address (by its routing table) that traffic to `host` would use.
bool routeSourceAddress(const std::string& host, std::string* out) {
  for (SocketAddress& dst : resolve(host)) {
    int fd = socket(dst.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    auto* port = dst.family() == AF_INET
                     ? &reinterpret_cast<sockaddr_in*>(&dst.storage)->sin_port
                     : &reinterpret_cast<sockaddr_in6*>(&dst.storage)->sin6_port;
    *port = htons(9);  // any port: nothing is sent
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    bool ok = ::connect(fd, dst.get(), dst.length) == 0 &&
              getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    close(fd);
    const auto* sa = reinterpret_cast<const sockaddr*>(&local);
    if (ok && !isUnspecified(sa)) {
      *out = formatIp(sa, len);
      return true;
    }
  }
  return false;
}

}  // namespace

bool parseNumericAddress(const std::string& ip, int port, SocketAddress* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  if (getaddrinfo(ip.c_str(), service.c_str(), &hints, &res) != 0 || res == nullptr) return false;
  bool ok = res->ai_family == AF_INET || res->ai_family == AF_INET6;
  if (ok) {
    std::memcpy(&out->storage, res->ai_addr, res->ai_addrlen);
    out->length = res->ai_addrlen;
  }
  freeaddrinfo(res);
  return ok;
}

bool sameIpAddress(const std::string& a, const std::string& b) {
  SocketAddress x, y;
  if (!parseNumericAddress(a, 0, &x) || !parseNumericAddress(b, 0, &y) ||
      x.family() != y.family()) {
    return false;
  }
  if (x.family() == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(x.get())->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(y.get())->sin_addr.s_addr;
  }
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(x.get())->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(y.get())->sin6_addr,
                     sizeof(in6_addr)) == 0;
}

std::string formatIp(const sockaddr* sa, socklen_t length) {
  char host[NI_MAXHOST] = {0};
  if (sa == nullptr || getnameinfo(sa, length, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) {
    return "?";
  }
  return host;
}

std::string joinHostPort(const std::string& ip, int port) {
  // Brackets keep an IPv6 address's colons apart from the port's.
  return ip.find(':') != std::string::npos ? strCat("[", ip, "]:", port) : strCat(ip, ":", port);
}

void splitHostPort(const std::string& s, const std::string& what, std::string* ip, int* port) {
  std::string host;
  size_t portAt = std::string::npos;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find("]:");
    if (close != std::string::npos && close > 1) {
      host = s.substr(1, close - 1);
      portAt = close + 2;
    }
  } else {
    size_t colon = s.rfind(':');
    // Unbracketed: one colon only, so that a bare IPv6 address is never cut at a wrong colon.
    if (colon != std::string::npos && colon > 0 && s.find(':') == colon) {
      host = s.substr(0, colon);
      portAt = colon + 1;
    }
  }
  char* end = nullptr;
  long p = portAt == std::string::npos || portAt >= s.size()
               ? -1
               : std::strtol(s.c_str() + portAt, &end, 10);
  if (host.empty() || end == nullptr || *end != '\0' || p <= 0 || p > 65535) {
    throw CommError(strCat("malformed address '", s, "' published for ", what,
                           " (expected ip:port or [ipv6]:port)"));
  }
  *ip = host;
  *port = static_cast<int>(p);
}

std::string chooseListenAddress(const ListenChoice& choice, std::string* why) {
  const std::string& masterAddr = choice.masterAddr;
  if (!choice.ifnameSpec.empty()) {
    std::string chosen;
    std::string ip = interfaceAddress(choice, &chosen);
    *why = strCat("interface ", chosen, ", chosen by ", choice.ifnameSource);
    return ip;
  }
  std::string ip;
  if (!masterAddr.empty() && routeSourceAddress(masterAddr, &ip)) {
    *why = strCat("the local address that reaches MASTER_ADDR=", masterAddr);
    return ip;
  }
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) {
    for (const SocketAddress& a : resolve(host)) {
      if (!isLoopback(a.get()) && !isUnspecified(a.get()) && !isLinkLocal6(a.get())) {
        *why = strCat("an address of host name ", host);
        return formatIp(a.get(), a.length);
      }
    }
  }
  *why = "loopback (no MASTER_ADDR, host name not resolvable to a non-loopback address)";
  return "127.0.0.1";
}

}  // namespace ring
