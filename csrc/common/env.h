// Every environment knob this project reads, in one place (README lists them).
#pragma once

#include <cstdint>
#include <string>

namespace ring {

struct EnvKnobs {
  // Bytes of payload in one FIFO slot (TORCH_RING_SLOT_BYTES, default 256 KiB): the pipeline
  // segment. Small enough to stay in L2 between the sender's copy and the receiver's reduce.
  int64_t slotBytes;
  // Slots per FIFO (TORCH_RING_SLOTS, default 4): how far a sender may run ahead.
  int slots;
  // Spin iterations before a waiter sleeps on a futex (TORCH_RING_SPIN, default 2000). With more
  // ranks than cores, long spinning starves the rank that would make progress.
  int spinIterations;
  // TORCH_RING_DEBUG = WARN | INFO | TRACE (default WARN).
  int debugLevel;
};

enum LogLevel { kLogWarn = 0, kLogInfo = 1, kLogTrace = 2 };

// Read once per process; later changes to the environment are not seen.
const EnvKnobs& env();

}  // namespace ring
