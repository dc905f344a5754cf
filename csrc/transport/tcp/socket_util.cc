#include "transport/tcp/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "common/errors.h"

namespace ring {
namespace {

std::string ipString(const in_addr& a) {
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

bool isLoopback(const in_addr& a) { return (ntohl(a.s_addr) >> 24) == 127; }

bool resolveIPv4(const std::string& host, in_addr* out) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  *out = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return true;
}

std::string interfaceAddress(const std::string& ifname) {
  ifaddrs* list = nullptr;
  RING_SYSCHECK(getifaddrs(&list), "listing network interfaces for TORCH_RING_SOCKET_IFNAME");
  std::string found, seen;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    std::string ip = ipString(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr);
    if (ifname == i->ifa_name && found.empty()) found = ip;
    seen += strCat(seen.empty() ? "" : ", ", i->ifa_name, " (", ip, ")");
  }
  freeifaddrs(list);
  if (found.empty()) {
    throw UsageError(strCat("TORCH_RING_SOCKET_IFNAME='", ifname,
                            "' names no interface with an IPv4 address; interfaces here: ",
                            seen.empty() ? "none" : seen));
  }
  return found;
}

// The UDP "connect" only sets the default destination: no packet leaves the host, but the
// kernel picks the source address (by its routing table) that traffic to `host` would use.
bool routeSourceAddress(const std::string& host, in_addr* out) {
  in_addr dst;
  if (!resolveIPv4(host, &dst)) return false;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(9);  // any port: nothing is sent
  sa.sin_addr = dst;
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  sockaddr_in local{};
  socklen_t len = sizeof local;
  ok = ok && getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  close(fd);
  if (!ok || local.sin_addr.s_addr == htonl(INADDR_ANY)) return false;
  *out = local.sin_addr;
  return true;
}

int waitFd(int fd, short events, Clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return ETIMEDOUT;
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, static_cast<int>(left.count() > 1000 ? 1000 : left.count() + 1));
    if (r < 0 && errno != EINTR) return errno;
    if (r > 0) return 0;
  }
}

}  // namespace

std::string chooseListenAddress(const std::string& ifname, const std::string& masterAddr,
                                std::string* why) {
  if (!ifname.empty()) {
    *why = strCat("interface ", ifname, " (TORCH_RING_SOCKET_IFNAME)");
    return interfaceAddress(ifname);
  }
  in_addr a;
  if (!masterAddr.empty() && routeSourceAddress(masterAddr, &a)) {
    *why = strCat("the local address that reaches MASTER_ADDR=", masterAddr);
    return ipString(a);
  }
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0 && resolveIPv4(host, &a) && !isLoopback(a)) {
    *why = strCat("the address of host name ", host);
    return ipString(a);
  }
  *why = "loopback (no MASTER_ADDR, host name not resolvable to a non-loopback address)";
  return "127.0.0.1";
}

void setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  RING_SYSCHECK(flags, "fcntl(F_GETFL)");
  RING_SYSCHECK(fcntl(fd, F_SETFL, flags | O_NONBLOCK), "fcntl(O_NONBLOCK)");
}

void setNoDelay(int fd) {
  // Frames are written whole; Nagle would only delay the last small one of a collective.
  int one = 1;
  RING_SYSCHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), "TCP_NODELAY");
}

int listenOn(const std::string& ip, int* port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;  // the kernel picks a free port: no collisions between jobs
  if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1) {
    throw UsageError(strCat("'", ip, "' is not an IPv4 address to listen on"));
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  RING_SYSCHECK(fd, "socket() for the listener");
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0 || listen(fd, 128) < 0) {
    int e = errno;
    close(fd);
    throw CommError(strCat("cannot listen on ", ip, ":0: ", std::strerror(e),
                           ". Set TORCH_RING_SOCKET_IFNAME to an interface of this host"));
  }
  socklen_t len = sizeof sa;
  RING_SYSCHECK(getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), "getsockname");
  *port = ntohs(sa.sin_port);
  return fd;
}

int connectTo(const std::string& ip, int port, Clock::time_point deadline,
              const std::function<void()>& beforeRetry) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1) {
    throw CommError(strCat("peer address '", ip, "' is not IPv4"));
  }
  int lastError = 0;
  auto pause = std::chrono::milliseconds(10);
  for (bool first = true; Clock::now() < deadline; first = false) {
    if (!first && beforeRetry) beforeRetry();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    RING_SYSCHECK(fd, "socket() to connect to ", ip, ":", port);
    int r = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    if (r < 0 && errno == EINPROGRESS) {
      r = waitFd(fd, POLLOUT, deadline);
      int soError = r;
      socklen_t len = sizeof soError;
      if (r == 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len);
      r = soError == 0 ? 0 : -1;
      errno = soError;
    }
    if (r == 0) {
      setNoDelay(fd);
      return fd;
    }
    lastError = errno;
    close(fd);
    // Refused or unreachable right now: the peer may still be starting; try again shortly.
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(500)) pause *= 2;
  }
  throw TimeoutError(strCat("could not connect to ", ip, ":", port, " before the set-up timeout",
                            lastError ? strCat(" (last error: ", std::strerror(lastError), ")")
                                      : std::string()));
}

int readFull(int fd, void* data, size_t bytes, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::recv(fd, p + got, bytes - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0) {
      return ECONNRESET;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (int e = waitFd(fd, POLLIN, deadline)) return e;
    } else if (errno != EINTR) {
      return errno;
    }
  }
  return 0;
}

int writeFull(int fd, const void* data, size_t bytes, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  size_t sent = 0;
  while (sent < bytes) {
    // MSG_NOSIGNAL: a closed peer must give EPIPE here, never SIGPIPE to the whole process.
    ssize_t n = ::send(fd, p + sent, bytes - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (int e = waitFd(fd, POLLOUT, deadline)) return e;
    } else if (errno != EINTR) {
      return errno;
    }
  }
  return 0;
}

std::string peerAddress(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0 || sa.sin_family != AF_INET) {
    return "?";
  }
  return strCat(ipString(sa.sin_addr), ":", ntohs(sa.sin_port));
}

void splitHostPort(const std::string& s, const std::string& what, std::string* ip, int* port) {
  size_t colon = s.rfind(':');
  char* end = nullptr;
  long p = colon == std::string::npos ? -1 : std::strtol(s.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || end == nullptr || *end != '\0' || p <= 0 ||
      p > 65535) {
    throw CommError(strCat("malformed address '", s, "' published for ", what));
  }
  *ip = s.substr(0, colon);
  *port = static_cast<int>(p);
}

void fillRandom(void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(p + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    RING_SYSCHECK(n, "getrandom");
    got += static_cast<size_t>(n);
  }
}

}  // namespace ring
