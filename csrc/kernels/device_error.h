// What a ring kernel tells the host when it stops early, and the word the host sets to stop
// it. Both live in host memory mapped into the device (cudaHostAlloc, mapped): the kernel's
// stores reach the host without any copy, and the host's abort store reaches a spinning
// kernel without a launch. Plain trivially-copyable structs: no torch, no CUDA types.
#pragma once

#include <cstdint>
#include <type_traits>

#include "protocol/message_header.h"

namespace ring {

enum DeviceStatus : int32_t {
  kDeviceOk = 0,
  kDeviceMismatch = 1,   // a received header disagreed with this rank's collective
  kDeviceAborted = 2,    // the host (timeout, broken group) or another block set the abort word
  kDeviceSpinLimit = 3,  // a wait outlived the kernel's own spin limit (the host never aborted)
};

// Which wait a block was in when it stopped.
enum DeviceWait : int32_t {
  kWaitNone = 0,
  kWaitMessage = 1,   // for message `expectedStep` from the previous rank (its `published`)
  kWaitSlot = 2,      // for a free slot at the next rank (this rank's `consumed`)
  kWaitDrain = 3,     // at the end, for the next rank to consume this rank's last message
};

// Written by the first block that stops (it wins a claim word in device memory); every field
// is stored before `status`, with a system-scope fence between, so a host that sees a non-zero
// status after the kernel has ended reads a complete record.
struct DeviceErrorRecord {
  int32_t status;         // DeviceStatus
  int32_t wait;           // DeviceWait
  int32_t channel;
  int32_t peer;           // the rank waited on (or whose header disagreed)
  int64_t expectedStep;   // message index within this collective on this channel
  int64_t expectedBytes;  // payload bytes this rank expected (mismatch only)
  uint64_t counterSeen;   // last value read of the counter waited on
  uint64_t counterTarget; // the value it had to reach
  Fingerprint expected;   // this rank's collective
  MessageHeader got;      // the header received (mismatch only)
};
static_assert(std::is_trivially_copyable<DeviceErrorRecord>::value,
              "written by the device into host memory as raw bytes");

// The whole host-mapped block of one communicator.
struct HostMappedControl {
  // Non-zero: every spinning block of this rank returns at its next check. Set by the host
  // watchdog (timeout, broken group) or by a block that recorded an error. Never cleared: a
  // stopped kernel leaves the FIFO counters out of step, so the communicator is finished.
  int32_t abort;
  int32_t pad[31];  // keep the record on its own lines, away from the polled word
  DeviceErrorRecord record;
};
static_assert(std::is_trivially_copyable<HostMappedControl>::value, "raw host-mapped bytes");

}  // namespace ring
