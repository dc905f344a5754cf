// Error types and check macros shared by every layer.
//
// Why three types: the backend maps them onto the exceptions torch users already know.
//   UsageError    - the caller passed something invalid; raised before any communication,
//                   the group stays usable (maps to ValueError / RuntimeError).
//   TimeoutError  - a bounded wait expired (maps to DistBackendError).
//   CommError     - the group is broken: a peer died, disagreed about the collective, or an
//                   abort was requested (maps to DistBackendError).
#pragma once

#include <cerrno>
#include <cstring>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ring {

class RingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class UsageError : public RingError {
 public:
  using RingError::RingError;
};
class CommError : public RingError {
 public:
  using RingError::RingError;
};
class TimeoutError : public CommError {
 public:
  using CommError::CommError;
};

namespace detail {
inline void appendAll(std::ostringstream&) {}
template <typename T, typename... Rest>
void appendAll(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  appendAll(os, rest...);
}
}  // namespace detail

// Concatenates every argument with operator<<: the way all messages here carry values.
template <typename... Args>
std::string strCat(const Args&... args) {
  std::ostringstream os;
  detail::appendAll(os, args...);
  return os.str();
}

// The text of a caught exception ("unknown error" for one that is not a std::exception).
inline std::string messageOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace ring

// User-facing check: throws UsageError with the caller's message (no file:line, the message
// names the collective and argument instead).
#define RING_USAGE_CHECK(cond, ...)                      \
  do {                                                   \
    if (!(cond)) {                                       \
      throw ::ring::UsageError(::ring::strCat(__VA_ARGS__)); \
    }                                                    \
  } while (0)

// Internal invariant: a failure is a bug in this project, so it carries file:line.
#define RING_ASSERT(cond, ...)                                                          \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      throw ::ring::RingError(::ring::strCat("internal error at ", __FILE__, ":",       \
                                             __LINE__, ": ", #cond, " failed. ",        \
                                             ##__VA_ARGS__));                           \
    }                                                                                   \
  } while (0)

// System call check: carries the call, errno text and location.
#define RING_SYSCHECK(expr, ...)                                                        \
  do {                                                                                  \
    if ((expr) < 0) {                                                                   \
      int savedErrno_ = errno;                                                          \
      throw ::ring::CommError(::ring::strCat(#expr, " failed: ", std::strerror(savedErrno_), \
                                             " (errno ", savedErrno_, ") at ", __FILE__,     \
                                             ":", __LINE__, ". ", ##__VA_ARGS__));          \
    }                                                                                   \
  } while (0)
