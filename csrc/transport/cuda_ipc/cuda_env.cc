#include "transport/cuda_ipc/cuda_env.h"

#include <cstdlib>

#include "common/env.h"
#include "common/errors.h"
#include "common/knob_table.h"

namespace ring {
const CudaKnobs& cudaKnobs() {
  static const CudaKnobs knobs = [] {
    CudaKnobs k;
    // The table's bound on the channels is the kernels' (they index a fixed array by channel).
    RING_ASSERT(knobInfo("TORCH_RING_CUDA_CHANNELS").hi == kMaxCudaChannels,
                "TORCH_RING_CUDA_CHANNELS's bound in knob_table.cc is not kMaxCudaChannels (",
                kMaxCudaChannels, ")");
    k.kernels = readKnob("TORCH_RING_CUDA_KERNELS") != 0;
    k.geometry.channels = static_cast<int32_t>(readKnob("TORCH_RING_CUDA_CHANNELS"));
    k.geometry.slots = static_cast<int32_t>(readKnob("TORCH_RING_CUDA_SLOTS"));
    const int64_t bytes = readKnob("TORCH_RING_CUDA_SLOT_BYTES");
    k.geometry.slotBytes = fifoAlignUp(bytes, kFifoPayloadAlign);
    k.blockingWait = readKnob("TORCH_RING_CUDA_BLOCKING_WAIT") != 0;
    return k;
  }();
  return knobs;
}

}  // namespace ring
