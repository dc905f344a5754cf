// Minimal leveled logging to stderr, prefixed so a user can grep one rank's lines.
#pragma once

#include "common/env.h"
#include "common/errors.h"

namespace ring {

void logLine(int level, const std::string& line);

}  // namespace ring

#define RING_LOG(level, ...)                                    \
  do {                                                          \
    if (::ring::env().debugLevel >= (level)) {                  \
      ::ring::logLine((level), ::ring::strCat(__VA_ARGS__));    \
    }                                                           \
  } while (0)
