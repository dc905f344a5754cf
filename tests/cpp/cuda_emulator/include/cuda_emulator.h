// Test controls of the emulated CUDA runtime (<cuda_runtime.h> beside this file): the shape of
// the emulated devices, failures to inject, and counters of what happened. Everything here is
// per process; a child forked after the runtime started gets a fresh runtime (no streams,
// events or allocations of its own) with its parent's configuration, failures and delays.
//
// The configuration is also read from the environment when the runtime starts in a process,
// so that a rank process started by a test (forked or exec'd) can be given one:
//   CUDA_EMULATOR_DEVICES=1          devices on the machine (0: cudaGetDeviceCount says
//                                    cudaErrorNoDevice)
//   CUDA_VISIBLE_DEVICES             CUDA's own: which of them this process sees, in its order
//   CUDA_EMULATOR_SMS=132            multiprocessors per device
//   CUDA_EMULATOR_BLOCKS_PER_SM=2    resident blocks per multiprocessor (any kernel)
//   CUDA_EMULATOR_LOCAL_BYTES=0      per-thread local memory of every kernel (its stack need)
//   CUDA_EMULATOR_STACK_BYTES=1024   the device's stack limit at start
//   CUDA_EMULATOR_PEER_ACCESS=1      0: cudaDeviceCanAccessPeer is 0 between distinct devices
//   CUDA_EMULATOR_LAUNCH_DELAY_MS=0  every kernel, when its turn on its stream comes, first
//                                    waits this long (a slow kernel: work ordered after it
//                                    only by a missing wait then reads stale data)
//   CUDA_EMULATOR_H2D_COPY_DELAY_MS=0  every asynchronous host-to-device copy, when its turn on
//                                    its stream comes, first waits this long (a busy copy
//                                    engine: the copy lands late, after work that other streams
//                                    queued meanwhile)
//   CUDA_EMULATOR_FAIL=cudaIpcGetMemHandle:801,cudaMalloc:2   calls that fail with that code
//   CUDA_EMULATOR_DELAY_MS=cudaMemcpyAsync:300   calls that first sleep that long (delayCall)
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace cudaemu {

struct Config {
  int devices = 1;
  int smsPerDevice = 132;
  int blocksPerSm = 2;
  size_t kernelLocalBytes = 0;
  size_t initialStackBytes = 1024;
  bool peerAccess = true;
  std::chrono::milliseconds launchDelay{0};
  std::chrono::milliseconds hostToDeviceCopyDelay{0};
  // CUDA_VISIBLE_DEVICES: a comma-separated list of device indices, the ones this process sees
  // and in that order; an invalid index hides itself and every index after it. Empty: all.
  std::string visibleDevices;
};

// The configuration in force (the environment's, until setConfig).
Config config();
// Applies at once; the device count may change only while no stream, event or allocation
// exists (else a std::logic_error), the rest at any time (the residency limit is read each
// time a block asks for room). The stack limit of existing devices is left as it is.
void setConfig(const Config& config);
// This kernel's per-thread local memory (cudaFuncGetAttributes' localSizeBytes, and what a
// launch of it needs of the stack limit), instead of Config::kernelLocalBytes.
void setKernelLocalBytes(const void* kernel, size_t bytes);

// Every later call of `api` (its name, e.g. "cudaIpcGetMemHandle") returns `error` without
// doing anything, until clearFailures().
void failCall(const std::string& api, cudaError_t error);
// Every later call of `api` first sleeps this long (a slow driver call), until clearFailures().
void delayCall(const std::string& api, std::chrono::milliseconds delay);
// Clears the injected failures and delays.
void clearFailures();

struct Counters {
  uint64_t kernelsLaunched = 0;    // launches that ran (all their blocks)
  uint64_t blocksRun = 0;
  int maxResidentBlocks = 0;       // on any one device at any one time
  uint64_t stackGrowthWaits = 0;   // launches that had to wait for an idle device
  int liveDeviceAllocations = 0;   // cudaMalloc'ed and not freed
  int liveHostAllocations = 0;     // cudaHostAlloc'ed and not freed
  int liveIpcMappings = 0;         // opened IPC handles not closed (by distinct allocation)
  int liveStreams = 0;             // created and not destroyed
  int liveEvents = 0;
};
Counters counters();
// Whether `device` has a primary context in this process: made by cudaSetDevice on it, or by
// the first call that needs a context on a thread whose current device it is.
bool hasContext(int device);
// How many times `api` was called in this process (failed calls included).
uint64_t calls(const std::string& api);
// Blocks resident on `device` right now.
int residentBlocks(int device);

}  // namespace cudaemu
