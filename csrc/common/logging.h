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

// The open LogScope of this thread (group null: none). The group is referred to, not copied:
// the caller's thread opens a scope on every collective, and copying the group's name in and
// back out was a few hundred instructions of a small call (issue 26). Trivially constructed,
// so opening a scope is two stores to thread-local memory, inline (issue 48).
struct LogScopeContext {
  int rank = -1;
  const std::string* group = nullptr;
};
inline thread_local LogScopeContext logScopeNow;

// The same for one scope of a thread that serves several groups (the caller's thread, which
// enters the backend for whichever group it calls); the previous context comes back after.
// `group` is referred to, not copied: it must outlive the scope (a group's own name does).
class LogScope {
 public:
  LogScope(int rank, const std::string& group) : saved_(logScopeNow) {
    logScopeNow.rank = rank;
    logScopeNow.group = &group;
  }
  LogScope(int rank, std::string&& group) = delete;  // a temporary would not outlive the scope
  ~LogScope() { logScopeNow = saved_; }
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;

 private:
  LogScopeContext saved_;  // the scope this one is inside of (group null: none)
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
