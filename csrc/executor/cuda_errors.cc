#include "executor/cuda_errors.h"

#include "common/errors.h"
#include "protocol/message_header.h"

namespace ring {
namespace {

std::string waitText(const DeviceErrorRecord& r) {
  switch (r.wait) {
    case kWaitMessage:
      return strCat("message ", r.expectedStep, " from rank ", r.peer, " on channel ", r.channel);
    case kWaitSlot:
      return strCat("a free slot at rank ", r.peer, " for message ", r.expectedStep,
                    " on channel ", r.channel);
    case kWaitDrain:
      return strCat("rank ", r.peer, " to consume the last of ", r.expectedStep,
                    " messages on channel ", r.channel);
    default:
      return strCat("its start (channel ", r.channel, ")");
  }
}

}  // namespace

std::string explainDeviceStop(const DeviceErrorRecord& r, int rank) {
  switch (r.status) {
    case kDeviceOk:
      return {};
    case kDeviceMismatch:
      try {
        verifyHeader(r.got, rank, r.peer, r.expectedStep, r.expectedBytes, r.expected);
      } catch (const CommError& e) {
        return e.what();
      }
      return strCat("ring: rank ", rank, " running ", describe(r.expected),
                    " rejected a message from rank ", r.peer, " on channel ", r.channel);
    case kDeviceAborted:
      return strCat("ring: rank ", rank, " stopped its CUDA ring kernel for ", describe(r.expected),
                    " while waiting for ", waitText(r), ": the group was aborted");
    case kDeviceSpinLimit:
      return strCat("ring: rank ", rank, " gave up in its CUDA ring kernel for ",
                    describe(r.expected), " after the kernel's spin limit, waiting for ",
                    waitText(r), " (counter at ", r.counterSeen, ", needed ", r.counterTarget,
                    "): that rank did not take part in this collective in time");
    default:
      return strCat("ring: rank ", rank, " CUDA ring kernel for ", describe(r.expected),
                    " stopped with unknown status ", r.status);
  }
}

}  // namespace ring
