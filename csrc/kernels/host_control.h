// The host's side of a rank's host-mapped control block (device_error.h): raising the abort
// word and reading the error record. Shared by the GPU set-up (CudaRingLinks) and the host-run
// kernel tests, so both read the record under the same ordering rule.
#pragma once

#include <cstring>

#include "kernels/device_error.h"

namespace ring {

// Stops every running and future ring kernel of this rank at its next check. Seq_cst, so the
// store is not held back behind anything this thread does next.
inline void raiseAbort(HostMappedControl* c) { __atomic_store_n(&c->abort, 1, __ATOMIC_SEQ_CST); }

inline bool abortRaised(const HostMappedControl* c) {
  return __atomic_load_n(&c->abort, __ATOMIC_ACQUIRE) != 0;
}

// The record the first stopping block wrote (status kDeviceOk if none). The status is read
// with acquire: the device stored every other field before its release store of the status.
inline DeviceErrorRecord readErrorRecord(const HostMappedControl* c) {
  DeviceErrorRecord r{};
  const int32_t status = __atomic_load_n(&c->record.status, __ATOMIC_ACQUIRE);
  if (status == kDeviceOk) return r;
  std::memcpy(&r, &c->record, sizeof r);
  r.status = status;
  return r;
}

}  // namespace ring
