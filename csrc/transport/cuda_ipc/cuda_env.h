// The CUDA path's knobs, read once from the environment. Every rank of a group must use the
// same values; ranks that disagree fall back to staging through host memory (the links
// compare geometries) rather than fail.
#pragma once

#include <cstdint>

#include "kernels/fifo_layout.h"

namespace ring {

struct CudaKnobs {
  // TORCH_RING_CUDA_KERNELS = 1 | 0 (default 1): 0 stages every CUDA tensor through host
  // memory over the CPU transport instead of running the CUDA ring kernels. (TORCH_RING_CUDA
  // is the build switch of setup.py.)
  bool kernels;
  // TORCH_RING_CUDA_CHANNELS (default 16, 1..32): CUDA blocks per collective, each an
  //   independent ring over its share of the buffer.
  // TORCH_RING_CUDA_SLOTS (default 8, 2..64): FIFO depth per channel.
  // TORCH_RING_CUDA_SLOT_BYTES (default 128 KiB, rounded up to 256 bytes, 256 B..64 MiB):
  //   payload per slot = the pipeline slice. Each rank's inbox holds channels x slots slots.
  FifoGeometry geometry;
  // TORCH_RING_CUDA_BLOCKING_WAIT = 0 | 1 (default 0): Work.wait() blocks the calling thread
  // until the kernel has finished and raises its error (like TORCH_NCCL_BLOCKING_WAIT); by
  // default wait() only makes the caller's current stream wait.
  bool blockingWait;
};

const CudaKnobs& cudaKnobs();

}  // namespace ring
