// What the TCP transport's I/O thread (tcp_io_loop.cc) and its frame reads and writes
// (tcp_connection_io.cc) share: the epoll event tags and the I/O thread's hold on one side of a
// connection. Internal to transport/tcp.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace ring {
namespace tcp_io {

// epoll user data: what an event is about, in the top byte; an index below.
enum : uint64_t { kTagWake = 1, kTagListen = 2, kTagPending = 3, kTagConn = 4 };
inline uint64_t tag(uint64_t kind, uint64_t index) { return kind << 56 | index; }
constexpr uint64_t kIndexMask = (uint64_t{1} << 56) - 1;

// The I/O thread's hold on one side (Connection::writeLock or readLock) of a connection. An
// executor holds a side only for a few non-blocking calls, so waiting is short; yielding lets
// that executor finish when it shares our core.
class SocketGuard {
 public:
  explicit SocketGuard(std::atomic<bool>& lock) : lock_(lock) {
    // acquire: the executor's writes to the write state are visible once we hold the lock.
    while (lock_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
  }
  ~SocketGuard() { lock_.store(false, std::memory_order_release); }
  SocketGuard(const SocketGuard&) = delete;
  SocketGuard& operator=(const SocketGuard&) = delete;

 private:
  std::atomic<bool>& lock_;
};

}  // namespace tcp_io
}  // namespace ring
