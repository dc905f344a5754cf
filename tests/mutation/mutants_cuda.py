"""The mutants of the CUDA path's torch layer and of what issue 47's read found in it: each run
by real torch over the emulated CUDA runtime ("emu": scripts/test_cuda_emulated.sh) or by the
torch-free engine's tests over the emulator ("cpp"). Part of mutants.py's list."""
from mutant_type import Mutant

_EMU = "tests/python/test_cuda_emulated.py -x -q -k"

CUDA_MUTANTS = [
    # The adapters' stream semantics (backend/cuda_work.cc, cuda_collectives.cc, cuda_sync.cc).
    Mutant("cuda_slot_reused_one_message_early", "csrc/kernels/ring_kernels.cuh",
           "        const uint64_t target = sent + 1 - static_cast<uint64_t>(g.slots);",
           "        const uint64_t target = sent - static_cast<uint64_t>(g.slots);", "emu",
           "tests/python/test_cuda_ordering_stress.py -x",
           why="a ring kernel writes into a FIFO slot one message before the next rank has "
               "consumed it: with the smallest FIFO the ordering stress reads another message"),
    Mutant("cuda_staged_alias_read_from_the_outputs_start", "csrc/backend/staging.cc",
           "      aliasOffset[i] = off;", "      aliasOffset[i] = 0;", "emu",
           "tests/python/test_cuda_alias.py -x -k all_gather",
           why="a staged in-place all_gather_into_tensor (FSDP's) reads every rank's input from "
               "the output's start: ranks but 0 send whatever the output held there"),
    Mutant("cuda_reduce_scatter_output_inside_input_not_copied", "csrc/backend/cuda_collectives.cc",
           "  at::Tensor in = overlaps(input, output) ? input.clone() : input;",
           "  at::Tensor in = input;", "emu",
           "tests/python/test_cuda_alias.py -x -k reduce_scatter",
           why="a reduce_scatter whose output lies inside its input is run in place: one "
               "channel's last step writes over input another channel has yet to read"),
    Mutant("cuda_ipc_handle_closed_at_its_first_users_close", "csrc/transport/cuda_ipc/ipc_handles.cc",
           "    if (--it->second.refs == 0) {", "    if (--it->second.refs >= 0) {", "cpp",
           "IpcHandlesAcrossProcesses.*", binaries=("ring_cuda_engine_tests",),
           why="a peer allocation opened by two users (both links of a 2-rank ring, two groups) "
               "is unmapped at the first one's close: the other reads unmapped memory"),
    Mutant("cuda_wait_reads_the_abort_word_on_its_first_miss", "csrc/kernels/device_flags.cuh",
           "    if (polls % kAbortCheckInterval == 0) {", "    if (polls % kAbortCheckInterval == 1) {",
           "cpp", "HostKernelFences.*", binaries=("ring_host_kernel_tests",),
           why="every wait that misses once reads the host-mapped abort word at once: a PCIe "
               "read per pipeline step on a GPU"),
    Mutant("cuda_message_shift_follows_the_element_index", "csrc/kernels/ring_kernels.cuh",
           "        sends ? fifoMessageShift(\n",
           "        sends ? walkDataPosition(w, s) * esize % 16 + 0 * fifoMessageShift(\n",
           "cpp", "HostKernelAlignment.*", binaries=("ring_host_kernel_tests",),
           why="a message sits in its slot by its element index, not its address: a tensor that "
               "starts off a 16-byte boundary on every rank moves every element singly"),
    Mutant("cuda_receiver_places_a_message_by_its_own_address", "csrc/kernels/ring_kernels.cuh",
           "    const char* in = receives ? own + fifoPayloadOffset(g, c, inSlot) + inShift : nullptr;",
           "    const char* in = receives ? own + fifoPayloadOffset(g, c, inSlot) + outShift : nullptr;",
           "cpp", "*/HostKernels.*", binaries=("ring_host_kernel_tests",),
           why="the receiver reads a message where its own buffer would put it, not where the "
               "sender put it (the header's shift): ranks whose buffers are offset differently "
               "read shifted bytes"),
    Mutant("cuda_device_factor_read_on_the_host", "csrc/backend/cuda_collectives.cc",
           "    return ScaleFactor::deviceResident(deviceFactor.const_data_ptr());",
           "    return deviceFactor.item<double>();", "emu",
           "tests/python/test_cuda_device_factor.py -x -k without_waiting",
           why="PREMUL_SUM's factor tensor on the GPU is read with .item(): every call waits for "
               "the caller's stream (torch's sync debug mode raises)"),
    Mutant("cuda_wait_skips_the_callers_stream", "csrc/backend/cuda_work.cc",
           "  cudaError_t e = cudaStreamWaitEvent(current, task_->endEvent(), 0);",
           "  cudaError_t e = cudaSuccess;", "emu", f"{_EMU} wait_orders",
           why="Work.wait() returns without making the caller's stream wait: a copy after it "
               "reads the input, not the sum"),
    Mutant("cuda_record_stream_dropped", "csrc/backend/cuda_collectives.cc",
           "    for (const at::Tensor& t : inputs) {\n"
           "      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), comm);\n"
           "    }\n"
           "    for (const at::Tensor& t : outputs) {\n"
           "      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), comm);\n"
           "    }\n", "", "emu", f"{_EMU} freed_input",
           why="a dropped input's memory is handed to a new tensor while the kernel still reads "
               "it"),
    Mutant("cuda_completion_hook_skipped", "csrc/backend/cuda_collectives.cc",
           "    if (sink->finished) {", "    if (false) {", "emu",
           f"{_EMU} completion_hook", quick=True,
           why="kernel collectives never reach the completion hook, the last error or the "
               "flight recorder's dump"),
    Mutant("cuda_streams_destroyed", "csrc/backend/cuda_sync.cc",
           "  released()[stream_.device_index()].push_back(raw_);",
           "  (void)cudaStreamDestroy(raw_);", "emu", f"{_EMU} freed_after_destroy",
           why="the backend's streams are destroyed at destroy_process_group: freeing a tensor "
               "the allocator recorded on one then aborts the process"),
    # The watchdog and a user's graph capture (executor/cuda_event.cc, cuda_task.cc).
    Mutant("cuda_capture_mode_not_exchanged", "csrc/executor/cuda_event.cc",
           "  if (cudaThreadExchangeStreamCaptureMode(&previous_) != cudaSuccess) {",
           "  if (true) {", "cpp", "CudaEngineCapture.*", quick=True,
           binaries=("ring_cuda_engine_tests",),
           why="the watchdog's event queries in Global mode break another thread's capture and "
               "read as a failed kernel"),
    Mutant("cuda_capture_refusal_is_a_failed_kernel", "csrc/executor/cuda_task.cc",
           "  if (q == cudaErrorStreamCaptureUnsupported) {", "  if (false) {", "cpp",
           "CudaEngineCapture.AQueryRefusedByTheCallersOwnCaptureIsNotAFailure",
           binaries=("ring_cuda_engine_tests",),
           why="Work.is_completed() inside the caller's own capture breaks the group"),
    Mutant("cuda_staged_not_refused_under_capture", "csrc/backend/cuda_route.cc",
           "  if (capture == cudaStreamCaptureStatusNone) return;", "  return;", "emu",
           f"{_EMU} staged_call_under_capture",
           why="a staged call under capture has its copies captured and fails later on every "
               "rank, instead of a refusal at once"),
    # The order of a group's CUDA calls (backend/ring_backend.cc, cuda_route.cc).
    Mutant("cuda_staged_copies_off_the_group_stream", "csrc/backend/ring_backend.cc",
           "      rank_, cuda_->orderStream(device), call.inputs, call.outputs);",
           "      rank_, cuda_->p2pStream(device), call.inputs, call.outputs);", "emu",
           f"{_EMU} earlier_kernels_result",
           why="a staged call copies its input before an earlier kernel of the group wrote it"),
    # route() makes the CUDA checks once, for the kernel and the staged paths alike.
    Mutant("cuda_route_skips_the_cuda_checks", "csrc/backend/ring_backend.cc",
           "  cuda_->beforeCollective(s, cudaTensor->device(), effectiveTimeout(timeout));\n", "",
           "emu", f"{_EMU} earlier_staged",
           why="no CUDA call waits for an earlier staged call's copies back: a later call "
               "reads its output before the copy landed"),
    Mutant("cuda_later_calls_not_after_staged", "csrc/backend/cuda_route.cc",
           "  if (earlier.empty()) return;", "  return;", "emu", f"{_EMU} earlier_staged",
           why="a call reads an earlier staged call's output before its copy back landed"),
    Mutant("cuda_timeout_not_a_timeout", "csrc/executor/cuda_watchdog.cc",
           "        t->fail(reason, /*timedOut=*/true);", "        t->fail(reason);", "emu",
           f"{_EMU} slow_hook_runs",
           why="a kernel collective that timed out reads as a communication error in "
               "get_future_result and get_error"),
    # A failed kernel collective's group must still be destroyable (backend/ring_backend_group.cc).
    Mutant("cuda_destroy_raises_a_reported_failure", "csrc/backend/ring_backend_group.cc",
           "  try {\n    waitCudaWork();\n  } catch (const CommError&) {\n  }",
           "  waitCudaWork();", "emu", f"{_EMU} slow_hook_runs",
           why="destroy_process_group of a group with a completion hook raises the kernel "
               "failure its Work already reported, and the group is never destroyed"),
    # The current device (backend/cuda_work.cc, staging.cc, cuda_collectives.cc).
    Mutant("cuda_wait_on_whatever_device_is_current", "csrc/backend/cuda_work.cc",
           "  c10::cuda::CUDAGuard guard(device_);\n  cudaStream_t current =",
           "  cudaStream_t current =", "emu", f"{_EMU} another_is_current",
           why="wait() makes the current device's legacy stream wait, not the tensor's device's"),
    Mutant("cuda_staged_events_queried_on_device_0", "csrc/backend/staging.cc",
           "  c10::cuda::CUDAGuard guard(device_);\n  copies_->waitCopiedIn(timeout);",
           "  copies_->waitCopiedIn(timeout);", "emu", f"{_EMU} second_gpu",
           why="the worker thread queries a staged call's events with device 0 current: a "
               "context there for every rank of a multi-GPU host"),
    Mutant("cuda_shutdown_on_device_0", "csrc/backend/cuda_collectives.cc",
           "  c10::cuda::CUDAGuard guard(device_);\n  engine_.reset();", "  engine_.reset();",
           "emu", f"{_EMU} second_gpu",
           why="the CUDA path shuts down with device 0 current: a context there"),
    # Failures (executor/cuda_group_state.cc, cuda_ring_engine.cc).
    Mutant("cuda_failure_at_enqueue_not_breaking", "csrc/executor/cuda_group_state.cc",
           "  breakGroup(failure);\n  throw CommError(failure);", "  throw CommError(failure);",
           "cpp", "CudaEngineFailures.ARankToldOfAFailureAtEnqueueIsBrokenToo", quick=True,
           binaries=("ring_cuda_engine_tests",),
           why="a rank told of a peer's failure at enqueue is not broken: it waits to close "
               "links its peer never closes"),
    Mutant("cuda_shutdown_closes_a_failed_group", "csrc/executor/cuda_ring_engine.cc",
           "  try {\n    state_->checkHealth();\n  } catch (const CommError&) {\n  }\n", "",
           "cpp", "CudaEngineFailures.ARankOfAFailedGroupDoesNotWaitToCloseAtShutdown",
           binaries=("ring_cuda_engine_tests",),
           why="a rank of a group that failed elsewhere waits out the close at shutdown"),
    Mutant("cuda_spin_limit_wraps", "csrc/executor/cuda_ring_engine.cc",
           "  if (timeout.count() >= kMaxMs) return RingWaitLimits{std::numeric_limits<uint64_t>::max()};",
           "  (void)kMaxMs;", "cpp", "CudaEngineFailures.AnEnormousTimeoutNeverStopsAKernelThatWaits",
           binaries=("ring_cuda_engine_tests",),
           why="a timeout near timedelta.max wraps the kernels' spin limit to a moment"),
    # Paths and kernels (transport/cuda_ipc/peer_info.cc, kernels/ring_kernels.cuh).
    Mutant("cuda_hidden_gpu_declined", "csrc/transport/cuda_ipc/peer_info.cc",
           "      if (sameProcess) {", "      if (true) {", "cpp", "CudaHost.PathChoice",
           quick=True, binaries=("ring_cuda_host_tests",),
           why="a peer on a GPU hidden by CUDA_VISIBLE_DEVICES is staged instead of opened by "
               "CUDA IPC"),
    Mutant("cuda_every_thread_fences", "csrc/kernels/ring_kernels.cuh",
           "    // Every thread has finished reading my slot and writing next's slot: the barrier",
           "    __threadfence_system();\n"
           "    // Every thread has finished reading my slot and writing next's slot: the barrier",
           "cpp", "HostKernelFences.*", quick=True, binaries=("ring_host_kernel_tests",),
           why="every thread of a block runs a system-scope fence per step, not thread 0 alone"),
    Mutant("cuda_threads_not_warned", "csrc/transport/cuda_ipc/cuda_ring_links.cc",
           "    if (fatal.empty() && sharing > 1) warnOfImplicitSynchronization(sharing, device_);",
           "", "emu", f"{_EMU} lazy_module_loading",
           why="ranks that are threads of one process on one GPU are not told of lazy loading "
               "and cudaFree stalling their kernels"),
    # Work._get_duration of CUDA calls (executor/cuda_task.cc, backend/staging.cc).
    Mutant("cuda_kernel_never_timed", "csrc/backend/cuda_collectives.cc",
           "  call.timed = timed_.load(std::memory_order_relaxed);", "  call.timed = false;",
           "emu", f"{_EMU} durations",
           why="collective timing on, a kernel's Work still says timing is off"),
    Mutant("cuda_duration_from_the_end_event", "csrc/executor/cuda_task.cc",
           "    e = cudaEventElapsedTime(&ms, start_, end_);",
           "    e = cudaEventElapsedTime(&ms, end_, end_);", "emu", f"{_EMU} durations",
           why="a kernel's duration measured from the wrong event: zero for every call"),
    # The dtypes added after the first ten, on the CUDA kernels (tests/python/cuda_dtype_checks.py).
    Mutant("uint32_reduced_as_int32_cuda", "csrc/reduce/reduce_ops.h",
           "struct StorageOf<DType::UInt32> { using type = uint32_t; };",
           "struct StorageOf<DType::UInt32> { using type = int32_t; };", "emu",
           "tests/python/test_cuda.py -x -q -k wide_unsigned",
           why="the CUDA kernels order uint32 values with the top bit set as negatives"),
    Mutant("staged_duration_dropped", "csrc/backend/staging.cc",
           "  if (!error) work_->setHostMilliseconds(hostMs);", "", "emu", f"{_EMU} durations",
           why="a call staged through host memory never tells its duration"),
]

CUDA_EMULATED_RUNTIME_MUTANTS = [
    # The CUDA path's host code over the emulated runtime (tests/cpp/test_cuda_engine*.cc).
    Mutant("cuda_comm_stream_not_waiting", "csrc/executor/cuda_ring_engine.cc",
           "  checkCuda(cudaStreamWaitEvent(commStream_, ready_, 0), \"cudaStreamWaitEvent\",\n"
           "            \"ordering the comm stream after the caller's\");", "", "cpp",
           "CudaEngine.TheKernelStartsAfterTheCallersStream", quick=True,
           binaries=("ring_cuda_engine_tests",),
           why="the kernel does not wait for the caller's stream: it reduces a stale input"),
    Mutant("cuda_record_read_before_end_event", "csrc/executor/cuda_task.cc",
           "    q = cudaEventQuery(end_);",
           "    q = state_->links().errorRecord().status != kDeviceOk ? cudaSuccess\n"
           "                                                           : cudaEventQuery(end_);",
           "cpp",
           "CudaEngineFailures.ATaskEndsOnlyWithItsEndEvent", binaries=("ring_cuda_engine_tests",),
           why="an error record seen before the end event counts as the kernel's end: the task "
               "is dropped while its kernel may still run"),
    Mutant("cuda_watchdog_never_checks_health", "csrc/executor/cuda_watchdog.cc",
           "        state_->checkHealth();", "        (void)0;", "cpp",
           "CudaEngineFailures.ABrokenGroupStopsTheKernelsInFlight",
           binaries=("ring_cuda_engine_tests",),
           why="a peer's failure is not seen by the watchdog: the kernels spin until the timeout"),
    Mutant("cuda_watchdog_misses_a_dead_peer", "csrc/executor/cuda_watchdog.cc",
           "        state_->checkHealth();", "        (void)0;", "cpp",
           "CudaEngineProcesses.APeerKilledMidCollectiveFailsTheOthersNamingIt",
           binaries=("ring_cuda_engine_tests",), timeout=180,
           why="a rank process killed mid-collective leaves the others' kernels spinning until "
               "their timeout"),
    Mutant("cuda_abort_word_never_raised", "csrc/executor/cuda_group_state.cc",
           "  links_->requestAbort();", "", "cpp",
           "CudaEngineFailures.ABrokenGroupStopsTheKernelsInFlight",
           binaries=("ring_cuda_engine_tests",), timeout=120,
           why="a broken group fails the tasks but never raises the abort word: the kernels "
               "spin on until their own spin limit"),
    Mutant("cuda_timeout_never_fires", "csrc/executor/cuda_watchdog.cc",
           "      if (t->elapsed() > t->timeout()) {", "      if (false) {", "cpp",
           "CudaEngineFailures.ATimeoutFailsEveryCallingRankWithinTheBound",
           binaries=("ring_cuda_engine_tests",), timeout=120,
           why="the watchdog never times a kernel out: only the device's spin limit ends it"),
    # CudaRingLinks, the launcher and the kernels over the emulated CUDA runtime
    # (tests/cpp/test_emulated_ring_*.cc).
    Mutant("cuda_inbox_freed_before_barrier", "csrc/transport/cuda_ipc/cuda_ring_links.cc",
           "  (void)unmapThenMeet(store, closedKey(), timeout);",
           "  release();\n  (void)unmapThenMeet(store, closedKey(), timeout);", "cpp",
           "EmulatedRingProcessesClose.ALateCloserTripsNothing", quick=True,
           binaries=("ring_cuda_emulated_tests",),
           why="closeCollectively frees the inbox before the store barrier: a late peer still "
               "has it mapped (undefined in CUDA; the emulator aborts)"),
    Mutant("cuda_decline_frees_before_peers_unmapped",
           "csrc/transport/cuda_ipc/cuda_ring_links.cc",
           "    if (unmapThenMeet(store, declinedKey(), opts.timeout)) release();",
           "    release();", "cpp",
           "EmulatedRingProcessesFailures.AnExportFailureDeclinesEveryRank", quick=True,
           binaries=("ring_cuda_emulated_tests",),
           why="a declined ring frees its inbox while a peer that had opened it is still "
               "closing it"),
    Mutant("cuda_coresidency_unchecked", "csrc/transport/cuda_ipc/cuda_ring_links.cc",
           "    fatal = coResidencyProblem(", "    (void)coResidencyProblem(", "cpp",
           "EmulatedRingThreadsFailures.MoreBlocksThanTheGpuHoldsAreRefused*", quick=True,
           binaries=("ring_cuda_emulated_tests",),
           why="a grid is launched without the co-residency check: more blocks than the GPU "
               "holds wait for each other, a hang instead of an error at set-up"),
    Mutant("cuda_threads_over_ipc", "csrc/transport/cuda_ipc/peer_info.cc",
           "  c.path = sameProcess ? PeerPath::Direct : PeerPath::Ipc;",
           "  c.path = PeerPath::Ipc;", "cpp",
           "WorldsAndChannels/EmulatedRingThreads.*world2_channels1", quick=True,
           binaries=("ring_cuda_emulated_tests",),
           why="threads of one process open each other's IPC handles (CUDA refuses: invalid "
               "device context), so the ring declines"),
    Mutant("cuda_inbox_not_zeroed", "csrc/transport/cuda_ipc/cuda_ring_links.cc",
           "  cudaError_t e = cudaMemsetAsync(inbox_, 0, static_cast<size_t>(bytes), s);",
           "  cudaError_t e = cudaSuccess;", "cpp",
           "EmulatedRingThreadsTiming.ARankThatComesLateIsWaitedFor", quick=True,
           binaries=("ring_cuda_emulated_tests",),
           # Killed by a rank that comes late: the ring tests alone killed it in two CI runs
           # of three (whether a peer had written before the counters were read was chance).
           why="the inbox's counters start as whatever cudaMalloc left there"),
    Mutant("cuda_stack_not_sized_at_set_up", "csrc/kernels/ring_launcher.cu",
           "  if (f.maxLocalBytes > stack) {", "  if (false) {", "cpp",
           "EmulatedRingThreadsFailures.TheStackIsSizedAtSetUpNotAtALaunch",
           binaries=("ring_cuda_emulated_tests",), timeout=120,
           why="the stack limit is left to the first launch, which waits for an idle device "
               "while a peer's kernel spins"),
]
