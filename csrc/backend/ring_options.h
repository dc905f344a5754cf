// The "ring" backend's options per group, as torch hands them to a backend: the timeout and
// the transport knobs that otherwise come from the environment. Visible in Python as
// torch_ring_backend.RingOptions, for init_process_group(pg_options=...), new_group,
// split_group and shrink_group.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/version.h>

#include <string>

// True when building against torch `major.minor` or newer.
#define RING_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||       \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace ring {

// torch's default group timeout (30 minutes), used when no timeout is given.
constexpr std::chrono::milliseconds kRingDefaultTimeout{30 * 60 * 1000};

struct RingOptions : c10d::Backend::Options {
  explicit RingOptions(std::chrono::milliseconds timeout = kRingDefaultTimeout)
      : c10d::Backend::Options("ring", timeout) {}

  std::string transport;   // "auto", "shm" or "tcp"; "" = TORCH_RING_TRANSPORT
  int64_t slotBytes = 0;   // bytes per FIFO slot; 0 = TORCH_RING_SLOT_BYTES
  int slots = 0;           // slots per FIFO; 0 = TORCH_RING_SLOTS

#if RING_TORCH_AT_LEAST(2, 14)
  // torch 2.14 clones a parent's options for a split child: keep the concrete type.
  c10::intrusive_ptr<c10d::Backend::Options> clone() const override {
    return c10::make_intrusive<RingOptions>(*this);
  }
#endif
};

}  // namespace ring
