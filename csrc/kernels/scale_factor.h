// PREMUL_SUM's factor as the CUDA kernels take it: a value the host holds, or one element of
// the collective's own dtype in device memory (a factor tensor on the GPU), which the kernel
// reads itself. Why: reading a device tensor on the host (`.item()`) waits for the caller's
// stream on every call; NCCL likewise takes a device-resident scalar (ncclScalarDevice).
#pragma once

#include "common/hostdevice.h"
#include "common/types.h"
#include "reduce/reduce_ops.h"

namespace ring {

struct ScaleFactor {
  double value = 1.0;
  const void* onDevice = nullptr;  // one element of the collective's dtype, or null: `value`

  ScaleFactor() = default;
  // Implicit on purpose: every caller with a host value (SUM's 1.0, a float factor) passes it.
  ScaleFactor(double v) : value(v) {}  // NOLINT(google-explicit-constructor)
  static ScaleFactor deviceResident(const void* element) {
    ScaleFactor f;
    f.onDevice = element;
    return f;
  }
};

// The factor as a double, as the host's `.item<double>()` gives it: the element widened exactly.
// Called in device code for a device-resident factor (its memory is the kernel's to read).
template <DType D>
RING_HOST_DEVICE double scaleFactorValue(const ScaleFactor& f) {
  if (f.onDevice == nullptr) return f.value;
  using T = typename StorageOf<D>::type;
  return static_cast<double>(widen(*static_cast<const T*>(f.onDevice)));
}

}  // namespace ring
