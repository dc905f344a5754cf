#include "transport/tcp/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
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
  SocketAddress sa;
  // Port 0: the kernel picks a free port, so jobs never collide.
  if (!parseNumericAddress(ip, 0, &sa)) {
    throw UsageError(strCat("'", ip, "' is not an IPv4 or IPv6 address to listen on"));
  }
  int fd = socket(sa.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  RING_SYSCHECK(fd, "socket() for the listener on ", ip);
  if (sa.family() == AF_INET6) {
    // This one address only, whatever the system default for dual-stack sockets is.
    int one = 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  }
  if (bind(fd, sa.get(), sa.length) < 0 || listen(fd, 128) < 0) {
    int e = errno;
    close(fd);
    throw CommError(strCat("cannot listen on ", joinHostPort(ip, 0), ": ", std::strerror(e),
                           ". Set TORCH_RING_SOCKET_IFNAME to an interface of this host"));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  RING_SYSCHECK(getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len), "getsockname");
  *port = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                           : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return fd;
}

int connectTo(const std::string& ip, int port, Clock::time_point deadline,
              const std::function<void()>& beforeRetry, const std::string& fromIp) {
  SocketAddress sa;
  if (!parseNumericAddress(ip, port, &sa)) {
    throw CommError(strCat("peer address '", ip, "' is not a numeric IPv4 or IPv6 address"));
  }
  SocketAddress source;
  if (!fromIp.empty() && (!parseNumericAddress(fromIp, 0, &source) ||
                          source.family() != sa.family())) {
    throw CommError(strCat("cannot connect from ", fromIp, " to ", joinHostPort(ip, port),
                           ": not an address of the same family (IPv4 and IPv6 do not mix)"));
  }
  int lastError = 0;
  auto pause = std::chrono::milliseconds(10);
  for (bool first = true; Clock::now() < deadline; first = false) {
    if (!first && beforeRetry) beforeRetry();
    int fd = socket(sa.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    RING_SYSCHECK(fd, "socket() to connect to ", joinHostPort(ip, port));
    if (!fromIp.empty() && bind(fd, source.get(), source.length) < 0) {
      int e = errno;
      close(fd);
      throw CommError(strCat("cannot bind the connection to ", joinHostPort(ip, port),
                             " to this rank's address ", fromIp, ": ", std::strerror(e)));
    }
    int r = ::connect(fd, sa.get(), sa.length);
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
  throw TimeoutError(strCat("could not connect to ", joinHostPort(ip, port),
                            " before the set-up timeout",
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
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0 ||
      (sa.ss_family != AF_INET && sa.ss_family != AF_INET6)) {
    return "?";
  }
  int port = ntohs(sa.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&sa)->sin_port
                                           : reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port);
  return joinHostPort(formatIp(reinterpret_cast<sockaddr*>(&sa), len), port);
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
