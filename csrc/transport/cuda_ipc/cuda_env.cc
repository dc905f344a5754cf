#include "transport/cuda_ipc/cuda_env.h"

#include <cstdlib>

#include "common/env.h"
#include "common/errors.h"

namespace ring {
const CudaKnobs& cudaKnobs() {
  static const CudaKnobs knobs = [] {
    CudaKnobs k;
    k.kernels = readInt("TORCH_RING_CUDA_KERNELS", 1, 0, 1) != 0;
    k.geometry.channels = static_cast<int32_t>(readInt("TORCH_RING_CUDA_CHANNELS", 16, 1, kMaxCudaChannels));
    k.geometry.slots = static_cast<int32_t>(readInt("TORCH_RING_CUDA_SLOTS", 8, 2, 64));
    int64_t bytes = readInt("TORCH_RING_CUDA_SLOT_BYTES", 128 * 1024, 1, 64 << 20);
    k.geometry.slotBytes = fifoAlignUp(bytes, kFifoPayloadAlign);
    k.blockingWait = readInt("TORCH_RING_CUDA_BLOCKING_WAIT", 0, 0, 1) != 0;
    return k;
  }();
  return knobs;
}

}  // namespace ring
