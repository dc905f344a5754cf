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
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

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
// Why not always one std::ostringstream per message: strCat also builds the flight recorder's
// line for every collective, on the caller's thread, and a stream (its locale, its buffer)
// costs more there than the rest of a small call's bookkeeping. So a message made only of
// strings and numbers is appended directly, formatted as a fresh stream would format it
// (integers in decimal, floating point as "%g", characters as characters); any other argument
// (a manipulator such as std::hex, whose state reaches the arguments after it, or a type with
// its own operator<<) sends the whole message through one stream.
template <typename T>
constexpr bool kAppendable =
    std::is_arithmetic_v<std::decay_t<T>> || std::is_convertible_v<const T&, std::string_view>;

inline void appendOne(std::string& out, std::string_view v) { out += v; }
inline void appendOne(std::string& out, const char* v) {
  if (v != nullptr) out += v;  // a stream prints nothing for a null C string
}
template <typename T>
std::enable_if_t<std::is_arithmetic_v<T>> appendOne(std::string& out, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    out += v ? '1' : '0';
  } else if constexpr (sizeof(T) == 1 && std::is_integral_v<T>) {
    out += static_cast<char>(v);  // char, signed char, unsigned char: a character
  } else if constexpr (std::is_integral_v<T>) {
    char buf[24];
    out.append(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
  } else if constexpr (std::is_same_v<T, long double>) {
    char buf[64];
    const int n = std::snprintf(buf, sizeof(buf), "%Lg", v);
    out.append(buf, n > 0 ? static_cast<size_t>(n) : 0);
  } else {
    char buf[32];
    const int n = std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
    out.append(buf, n > 0 ? static_cast<size_t>(n) : 0);
  }
}
}  // namespace detail

// Concatenates every argument as operator<< would print it: the way all messages here carry
// values.
template <typename... Args>
std::string strCat(const Args&... args) {
  if constexpr ((detail::kAppendable<Args> && ...)) {
    std::string out;
    (detail::appendOne(out, args), ...);
    return out;
  } else {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
  }
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
