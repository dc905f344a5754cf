// How host-compiled device code is launched on the emulated runtime, whichever <cuda_runtime.h>
// the caller compiles against: the tests' own (api/cuda_runtime.h) or CUDA's, as the
// extension does when it runs over the emulator built as libcudart.so.13.
//
// Why a launch of its own: CUDA's C entry cudaLaunchKernel(const void* func, ..., void** args)
// learns the parameters' sizes from the registered device code, which host-compiled kernels do
// not have. The typed launch below copies the arguments with their C++ types when the launch is
// enqueued (as cudaLaunchKernel does) and hands the emulator a launch object that runs the
// kernel as one CUDA thread. Both builds of the emulator export enqueueLaunch; the host side of
// the device code (a runner of each block's threads) is the caller's: runBlockThreads.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cudaemu {

// One block of a launch, as the emulated device hands it to the code that runs device
// functions on host threads.
struct BlockLaunch {
  dim3 grid;
  dim3 block;
  uint3 blockIdx;
  void (*threadMain)(const void* launch);  // runs the kernel once, as one CUDA thread
  const void* launch;                      // the launch (its copied arguments)
};

// Runs every thread of one block and returns when they have all returned. The emulator does
// not define it: the host build of the device code does (kernels/host_shim.cc in this
// project, the test's own in the emulator's tests), as on a GPU the compiler supplies the
// device side of a launch and the runtime only schedules it. Referenced only by a launch.
void runBlockThreads(const BlockLaunch& block);

// The arguments of one launch, copied when it is enqueued (a launch may outlive the caller's
// argument variables, as on a GPU).
class KernelLaunch {
 public:
  virtual ~KernelLaunch() = default;
  virtual void runThread() const = 0;
};

template <typename... P>
class TypedKernelLaunch final : public KernelLaunch {
 public:
  template <size_t... I>
  TypedKernelLaunch(void (*kernel)(P...), void** args, std::index_sequence<I...>)
      : kernel_(kernel), args_(*static_cast<std::decay_t<P>*>(args[I])...) {}
  void runThread() const override {
    // Every thread gets its own copy of the parameters, as each CUDA thread reads its own.
    std::tuple<std::decay_t<P>...> mine = args_;
    std::apply(kernel_, mine);
  }

 private:
  void (*kernel_)(P...);
  std::tuple<std::decay_t<P>...> args_;
};

// Checks the configuration and enqueues the grid on `stream`: it runs later on the stream's
// host thread, each block once the device has room for it. Errors as cudaLaunchKernel's.
cudaError_t enqueueLaunch(const void* kernel, dim3 grid, dim3 block, size_t sharedMem,
                          cudaStream_t stream, std::shared_ptr<const KernelLaunch> launch,
                          void (*runBlock)(const BlockLaunch&));

// cudaLaunchKernel's typed form: the arguments are copied now; the grid runs later.
template <typename... P>
cudaError_t launchTyped(void (*kernel)(P...), dim3 grid, dim3 block, void** args,
                        size_t sharedMem, cudaStream_t stream) {
  std::shared_ptr<const KernelLaunch> launch;
  if (kernel != nullptr && (args != nullptr || sizeof...(P) == 0)) {
    launch = std::make_shared<TypedKernelLaunch<P...>>(kernel, args,
                                                       std::index_sequence_for<P...>{});
  }
  return enqueueLaunch(reinterpret_cast<const void*>(kernel), grid, block, sharedMem, stream,
                       std::move(launch), &runBlockThreads);
}

}  // namespace cudaemu
