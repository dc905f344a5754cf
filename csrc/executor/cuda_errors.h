// Words for a ring kernel that stopped early: the host reads the device's error record after
// the kernel ended and raises the same messages the CPU path raises (a header mismatch goes
// through verifyHeader itself), so a user sees one vocabulary whichever path ran.
#pragma once

#include <string>

#include "kernels/device_error.h"

namespace ring {

// "" when r.status is kDeviceOk.
std::string explainDeviceStop(const DeviceErrorRecord& r, int rank);

}  // namespace ring
