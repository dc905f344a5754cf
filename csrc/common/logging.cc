#include "common/logging.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

namespace ring {
namespace {

// The group a thread works for all its life (setThreadLogContext); a LogScope's, while one is
// open, is logScopeNow (logging.h).
struct ThreadContext {
  int rank = -1;  // -1: this thread works for no particular group
  std::string group;
};

ThreadContext& threadContext() {
  thread_local ThreadContext context;
  return context;
}

// The rank that names this thread's lines now: its open scope's, else its own (-1: none).
int rankNow() { return logScopeNow.group != nullptr ? logScopeNow.rank : threadContext().rank; }

std::string hostName() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown-host";
  return host;
}

// "2026-11-30T19:06:59.123456Z": UTC, so that lines from hosts in different zones sort.
std::string utcTimestamp() {
  auto now = std::chrono::system_clock::now();
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch());
  std::time_t seconds = static_cast<std::time_t>(micros.count() / 1000000);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[40];
  size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &parts);
  std::snprintf(text + n, sizeof text - n, ".%06lldZ",
                static_cast<long long>(micros.count() % 1000000));
  return text;
}

// Where lines go: opened on the first line, so that a job that logs nothing creates no file.
// A file that cannot be opened is said once on stderr, and the lines go to stderr.
FILE* sink() {
  static std::once_flag once;
  static FILE* out = stderr;
  std::call_once(once, [] {
    const std::string& pattern = env().debugFile;
    if (pattern.empty()) return;
    std::string path = expandLogFilePattern(pattern, rankNow());
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr,
                   "[torch_ring] TORCH_RING_DEBUG_FILE='%s': cannot open %s (%s); logging to "
                   "stderr\n",
                   pattern.c_str(), path.c_str(), std::strerror(errno));
      return;
    }
    out = f;
  });
  return out;
}

}  // namespace

std::string expandLogFilePattern(const std::string& pattern, int rank) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    char c = pattern[++i];
    if (c == 'h') {
      out += hostName();
    } else if (c == 'p') {
      out += std::to_string(getpid());
    } else if (c == 'r') {
      const char* envRank = std::getenv("RANK");
      out += envRank != nullptr && *envRank != '\0' ? std::string(envRank)
             : rank >= 0                            ? std::to_string(rank)
                                                    : std::string("unknown");
    } else if (c == '%') {
      out += '%';
    } else {
      out += '%';
      out += c;
    }
  }
  return out;
}

void setThreadLogContext(int rank, const std::string& group) {
  ThreadContext& c = threadContext();
  c.rank = rank;
  c.group = group;
}

void logLine(int level, const std::string& line) {
  static const char* names[] = {"WARN", "INFO", "TRACE"};
  static const std::string host = hostName();
  const ThreadContext& c = threadContext();
  std::string who;
  if (logScopeNow.group != nullptr) {
    who = strCat(" rank ", logScopeNow.rank, " group '", *logScopeNow.group, "'");
  } else if (c.rank >= 0) {
    who = strCat(" rank ", c.rank, " group '", c.group, "'");
  }
  FILE* out = sink();
  // One fprintf per line so lines of concurrent threads do not interleave mid-line.
  std::fprintf(out, "[torch_ring %s %s:%d%s %s] %s\n", utcTimestamp().c_str(), host.c_str(),
               static_cast<int>(getpid()), who.c_str(), names[level], line.c_str());
  if (out != stderr) std::fflush(out);
}

}  // namespace ring
