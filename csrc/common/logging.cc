#include "common/logging.h"

#include <unistd.h>

#include <cstdio>

namespace ring {

void logLine(int level, const std::string& line) {
  static const char* names[] = {"WARN", "INFO", "TRACE"};
  // One fprintf per line so lines of concurrent threads do not interleave mid-line.
  std::fprintf(stderr, "[torch_ring %s pid %d] %s\n", names[level], static_cast<int>(getpid()),
               line.c_str());
}

}  // namespace ring
