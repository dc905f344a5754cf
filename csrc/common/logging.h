// Leveled logging (TORCH_RING_DEBUG) to stderr or to TORCH_RING_DEBUG_FILE. Every line says
// when (UTC, microseconds), where (host:pid), and for whom (rank and group, when the thread
// works for one), so that the lines of many ranks can be merged and grepped:
//   [torch_ring 2026-11-30T19:06:59.123456Z node3:4242 rank 1 group 'default' INFO] ...
#pragma once

#include <string>

#include "common/env.h"
#include "common/errors.h"

namespace ring {

void logLine(int level, const std::string& line);

// Every line the calling thread logs from now on names this rank and group: for a thread that
// works for one group all its life (a group's worker or I/O thread).
void setThreadLogContext(int rank, const std::string& group);

// The same for one scope of a thread that serves several groups (the caller's thread, which
// enters the backend for whichever group it calls); the previous context comes back after.
// `group` is referred to, not copied: it must outlive the scope (a group's own name does).
class LogScope {
 public:
  LogScope(int rank, const std::string& group);
  LogScope(int rank, std::string&& group) = delete;  // a temporary would not outlive the scope
  ~LogScope();
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;

 private:
  int savedRank_;
  const std::string* savedGroup_;
};

// TORCH_RING_DEBUG_FILE's pattern with %h (host name), %p (pid), %r (rank: RANK from the
// environment, else `rank`, else "unknown") and %% expanded; other characters as they are.
std::string expandLogFilePattern(const std::string& pattern, int rank);

}  // namespace ring

#define RING_LOG(level, ...)                                    \
  do {                                                          \
    if (::ring::env().debugLevel >= (level)) {                  \
      ::ring::logLine((level), ::ring::strCat(__VA_ARGS__));    \
    }                                                           \
  } while (0)
