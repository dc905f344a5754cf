#!/usr/bin/env python3
"""Hand-picked mutants of the source, each built incrementally and run against the tests that
should catch it. A mutant is KILLED when those tests fail (or time out), SURVIVED when they pass:
a surviving mutant is a hole in the tests.

    python3 tests/mutation/mutate.py            # every mutant (by hand: about half an hour)
    python3 tests/mutation/mutate.py --quick    # the CI subset (C++ and TSan, a few minutes)
    python3 tests/mutation/mutate.py --only avg_as_multiply

By default the mutants go into a scratch copy, build/mutation/tree, with build folders of its
own: the working tree is never modified. `--in-place` (what CI uses on its throwaway clone)
mutates the checkout itself and reuses the build folders scripts/test.sh has just built, so only
what a mutant touches recompiles; it refuses a checkout with uncommitted changes and restores
every file it changed. Before any mutant, each chosen test command must pass on the unmutated
tree, or a "kill" would mean nothing. Exit code 0 only if every mutant was killed.
"""
import argparse
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRATCH = os.path.join(ROOT, "build", "mutation")

# Where the tree and its build folders are: set by main() (scratch copy or in place).
TREE = CPP_BUILD = TSAN_BUILD = EXT_BUILD = ""


@dataclasses.dataclass
class Mutant:
    name: str
    path: str    # relative to the tree
    find: str    # must occur exactly once
    replace: str
    kind: str    # "cpp": a gtest filter; "tsan": a gtest filter under TSan; "py": pytest args
    tests: str
    quick: bool = False  # part of the CI subset
    why: str = ""
    binaries: tuple = ("ring_unit_tests",)  # "cpp": the gtest programs to build and run
    timeout: int = 0  # seconds for its tests, when shorter than --timeout (a mutant that hangs)


MUTANTS = [
    Mutant("max_is_min", "csrc/reduce/reduce_ops.h",
           "(a > b ? a : b)));", "(a < b ? a : b)));", "cpp", "ReduceOps.*", quick=True,
           why="MAX computes MIN"),
    Mutant("avg_as_multiply", "csrc/reduce/reduce_ops.h",
           "widen(v[i]) / static_cast<A>(divisor)",
           "widen(v[i]) * (static_cast<A>(1) / static_cast<A>(divisor))", "cpp",
           "ReduceOps.*:*CommunicatorInWorld.*",
           why="AVG multiplies by 1/n: differs in the last bit for some sums"),
    Mutant("avg_as_multiply_py", "csrc/reduce/reduce_ops.h",
           "widen(v[i]) / static_cast<A>(divisor)",
           "widen(v[i]) * (static_cast<A>(1) / static_cast<A>(divisor))", "py",
           "tests/python/test_all_reduce.py -x -q -k float32",
           why="the same, caught by the Python suite's reference (inputs whose AVG rounds)"),
    Mutant("chunk_count_off_by_one", "csrc/schedule/partition.h",
           "r.count = base + (i < extra ? 1 : 0);", "r.count = base + (i <= extra ? 1 : 0);", "cpp",
           "Partition.*:Plans.*", quick=True,
           why="one chunk takes an element too many: chunks overlap, the last runs past the end"),
    Mutant("ring_step_order", "csrc/schedule/ring_steps.h",
           "s.chunk = modRank(rank - i, n);", "s.chunk = modRank(rank - i + 1, n);", "cpp",
           "Plans.*:CudaWalk.*", quick=True, why="reduce-scatter forwards the wrong chunk",
           binaries=("ring_unit_tests", "ring_cuda_host_tests")),
    Mutant("header_step_field", "csrc/executor/cpu_executor.cc",
           "h->step = step;", "h->step = step + 1;", "cpp", "*CommunicatorInWorld.*",
           quick=True, why="headers carry the wrong message index",
           binaries=("ring_unit_tests", "ring_tcp_tests")),
    Mutant("tag_ignored", "csrc/executor/p2p_receiver.cc",
           "  return r.tag == tag && (r.peer < 0 || r.peer == src);",
           "  return r.peer < 0 || r.peer == src;", "cpp",
           "P2PEngine.*", quick=True, why="a receive takes a held message of another tag"),
    Mutant("broken_not_shared", "csrc/transport/shm/shm_transport.cc",
           "c.brokenState.store(2, std::memory_order_release);", "", "cpp",
           "ShmTransport.MarkBroken*:*SizeMismatch*", quick=True,
           why="a rank's failure is not told to the others"),
    Mutant("shm_foreign_segment_accepted", "csrc/transport/shm/shm_segment.cc",
           "if (st.st_uid != geteuid() || mode != 0600) {", "if (st.st_uid != geteuid()) {",
           "cpp", "ShmSegment.*",
           why="a peer's segment that others may open (a name planted in the store) is used"),
    Mutant("shm_pages_not_reserved", "csrc/transport/shm/shm_segment.cc",
           "int e = posix_fallocate(fd, 0, static_cast<off_t>(bytes));",
           "int e = ftruncate(fd, static_cast<off_t>(bytes)) < 0 ? errno : 0;", "cpp",
           "ShmSegment.*", why="a full /dev/shm shows up later as SIGBUS, not at set-up"),
    Mutant("tcp_source_address_ignored", "csrc/transport/tcp/tcp_transport.cc",
           "  if (!sameIpAddress(fromIp, expected)) {", "  if (false) {", "cpp",
           "TcpStrangers.*", quick=True, binaries=("ring_tcp_tests",),
           why="a process that read the token from the store takes a rank's place from any host"),
    Mutant("tcp_listener_left_open", "csrc/transport/tcp/tcp_io_loop.cc",
           "  if (listenFd_ >= 0) {\n    epoll_ctl(epollFd_, EPOLL_CTL_DEL, listenFd_, nullptr);",
           "  if (false) {\n    epoll_ctl(epollFd_, EPOLL_CTL_DEL, listenFd_, nullptr);", "cpp",
           "TcpTransport.TheListenerIsClosed*", binaries=("ring_tcp_tests",),
           why="strangers can still connect (and cost the I/O thread) after set-up"),
    Mutant("tcp_secret_ignored", "csrc/transport/tcp/wire.cc",
           "  if (secret.empty()) {\n    std::memcpy", "  if (true) {\n    std::memcpy", "cpp",
           "TcpSecret.*:Wire.*", binaries=("ring_tcp_tests",),
           why="TORCH_RING_SECRET is read but not mixed into the key: the store's token suffices"),
    Mutant("tcp_proof_bare_sha256", "csrc/transport/tcp/wire.cc",
           "  HmacSha256 h(key.data(), key.size());\n  if (role",
           "  Sha256 h;\n  h.update(key.data(), key.size());\n  if (role", "cpp",
           "Wire.*", binaries=("ring_tcp_tests",),
           why="the proof is SHA-256 over key || message again, not HMAC"),
    Mutant("ifname_exclusion_ignored", "csrc/transport/tcp/interface_filter.cc",
           "  return listed != exclude;", "  return listed;", "cpp",
           "InterfaceFilter.*:NetAddress.*", binaries=("ring_tcp_tests",),
           why="TORCH_RING_SOCKET_IFNAME=^docker picks docker0"),
    Mutant("kernel_publish_relaxed", "csrc/kernels/host_shim.h",
           "std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);",
           "std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_relaxed);", "tsan",
           "WorldsAndChannels/HostKernels.*world2_channels1*", quick=True,
           why="the kernels' counter publish loses its release (TSan: data race)"),
    Mutant("kernel_publish_before_payload", "csrc/kernels/ring_kernels.cuh",
           "    dev::moveStep<D, Op>(s.prim, src, dst, in, out, s.count, p.factor, p.divisor);",
           "    if (threadIdx.x == 0 && sends) dev::storeReleaseSys(nextPublished, sent + 1);\n"
           "    dev::moveStep<D, Op>(s.prim, src, dst, in, out, s.count, p.factor, p.divisor);",
           "tsan", "WorldsAndChannels/HostKernels.*world2_channels1*",
           why="the kernels publish a message before writing it (TSan: data race)"),
    Mutant("kernel_channels_contiguous", "csrc/schedule/ring_walk.h",
           "  const Range whole = chunkRange(w.count, w.nranks, chunk);\n"
           "  const Range part = chunkRange(whole.count, w.channels, w.channel);",
           "  const Range whole = chunkRange(w.count, w.channels, w.channel);\n"
           "  const Range part = chunkRange(whole.count, w.nranks, chunk);", "cpp",
           "CudaWalk.EveryElement*:WorldsAndChannels/HostKernels.*",
           why="all-reduce channels reorder the additions: not the CPU executor's bits",
           binaries=("ring_host_kernel_tests", "ring_cuda_host_tests")),
    Mutant("kernel_spin_limit_ignored", "csrc/kernels/device_flags.cuh",
           "if (globalTimerNs() - start > bounds.spinLimitNs) {", "if (false) {", "cpp",
           "HostKernelFailures.TheSpinLimitFiresWithItsRecord",
           why="a kernel waits forever without its host (its test hangs: killed at 60 s)",
           binaries=("ring_host_kernel_tests",), timeout=60),
    Mutant("deadline_too_late", "csrc/executor/communicator.cc",
           "ctx.deadline = ctx.start + c.timeout;", "ctx.deadline = ctx.start + c.timeout * 3 / 2;",
           "py", "tests/python/test_faults.py -x -q -k timeout_names",
           why="collectives time out at 1.5x the timeout"),
    Mutant("use_after_shutdown_queued", "csrc/backend/work_queue.cc",
           "    if (stopping_) {", "    if (false) {", "py",
           "tests/python/test_faults.py -x -q -k use_after_destroy", timeout=150,
           why="a collective after destroy_process_group is queued to a stopped worker: it hangs"),
    Mutant("profiler_spans_never_captured", "csrc/backend/comm_profile.cc",
           "  if (!at::hasCallbacks()) return nullptr;", "  return nullptr;", "py",
           "tests/python/test_profiler.py -x -q -k profiled", timeout=200,
           why="torch's profiler sees no ring:<collective> span and no record_param_comms"),
    Mutant("profiler_state_left_on_the_caller", "csrc/backend/comm_profile.cc",
           "  at::ThreadLocalStateGuard asTheCaller(callerState_);\n", "", "py",
           "tests/python/test_profiler.py -x -q -k worker_thread", timeout=200,
           why="a collective that runs on the group's worker thread is invisible to the profiler "
               "(its callbacks are the caller thread's)"),
    Mutant("replicas_buffers_skipped", "torch_ring_backend/replicas.py",
           "    for name, b in module.named_buffers():", "    for name, b in []:", "py",
           "tests/python/test_replicas.py -x -q -k drifted_buffer",
           why="verify_replicas compares parameters only: BatchNorm statistics drift unseen"),
    Mutant("replicas_digest_without_bytes", "torch_ring_backend/replicas.py",
           "        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())", "        pass",
           "py", "tests/python/test_replicas.py -x -q -k ulp",
           why="verify_replicas hashes shapes and dtypes only: any values pass"),
    Mutant("straggler_lateness_from_the_last", "csrc/executor/straggler_stats.cc",
           "  const int64_t first = *std::min_element(issuedNs.begin(), issuedNs.end());",
           "  const int64_t first = *std::max_element(issuedNs.begin(), issuedNs.end());", "py",
           "tests/python/test_stragglers.py -x -q -k sleeps", timeout=200,
           why="lateness measured from the last rank to issue: the straggler looks punctual"),
    Mutant("fr_dump_failed_as_completed", "csrc/backend/fr_dump.cc",
           '  if (state == "completed") return "completed";',
           '  if (state == "completed" || state == "failed") return "completed";', "py",
           "tests/python/test_fr_dump.py -x -q -k skipped", timeout=240,
           why="a collective that failed reads as completed in the dump: fr_trace and trace "
               "see a job that parted nowhere"),
    Mutant("trace_blind_to_ranks_that_never_issued", "torch_ring_backend/trace.py",
           "            if all(e[\"state\"] == \"completed\" for e in have.values()) and not never:",
           "            if all(e[\"state\"] != \"scheduled\" for e in have.values()):", "py",
           "tests/python/test_fr_dump.py -x -q -k skipped", timeout=240,
           why="trace passes over the collective a rank never issued"),
    Mutant("fr_dump_signal_not_passed_on", "csrc/backend/fr_dump_signal.cc",
           "  (void)!write(gWakeFd, &byte, 1);", "  (void)byte;", "py",
           "tests/python/test_fr_dump.py -x -q -k signal_writes", timeout=240,
           why="the signal is caught but no dump is written: a hung job leaves nothing to read"),
    Mutant("small_calls_never_run_here", "csrc/backend/ring_backend.cc",
           "  return comm.allIssued(seq + 1, patience);",
           "  return false && comm.allIssued(seq + 1, patience);", "py",
           "tests/perf/test_latency_floor.py -x -q", timeout=900,
           why="every small call is handed to the worker thread: two thread wake-ups per call"),
    Mutant("rd_partners_combine_in_own_order", "csrc/executor/recursive_doubling.cc",
           "    if (p.lower) {", "    if (false) {", "cpp",
           "TwoLevelAllReduce.*", quick=True, binaries=("ring_tcp_tests",),
           why="each partner of an exchange puts its own operand first: MAX of -0 and +0 "
               "keeps different zeros on different ranks"),
    Mutant("segment_owner_off_by_one", "csrc/schedule/host_layout.cc",
           "      s.owners.push_back(host[static_cast<size_t>(modRank(k - 1, parts))]);",
           "      s.owners.push_back(host[static_cast<size_t>(modRank(k, parts))]);", "cpp",
           "HostSegments.*:EveryPlan*", quick=True,
           binaries=("ring_unit_tests", "ring_tcp_tests"),
           why="the inter-host phase reduces a part a rank did not reduce inside its host"),
    Mutant("local_major_order_swapped", "csrc/schedule/host_layout.cc",
           "  return layout.localIndex(rank) * layout.hosts() + layout.hostOf[static_cast<size_t>(rank)];",
           "  return layout.hostOf[static_cast<size_t>(rank)] * layout.ranksPerHost() + layout.localIndex(rank);",
           "cpp", "*EveryGatherScatterPlan*", binaries=("ring_tcp_tests",),
           why="the two-level all_gather's staging order must keep the parts of one local index "
               "together: ordered by host first, they land in other ranks' blocks"),
    Mutant("host_sum_divided_twice", "csrc/executor/hier_gather_scatter.cc",
           "    within.divide = nullptr;", "", "cpp",
           "*EveryGatherScatterPlan*ReduceScatter*", binaries=("ring_tcp_tests",),
           why="AVG divides once, when the hosts' sums meet; dividing each host's sum too "
               "divides twice"),
    Mutant("broadcast_root_taken_as_a_position", "csrc/executor/communicator.cc",
           "                                     hostRingPos_[static_cast<size_t>(root)], count,",
           "                                     root, count,", "cpp",
           "*EveryGatherScatterPlan*Broadcast*", quick=True, binaries=("ring_tcp_tests",),
           why="on the host-major ring the root sits at its place there, not at its rank: with "
               "interleaved hosts the chain would start at another rank"),
    Mutant("two_level_direct_gather_not_dispatched", "csrc/executor/communicator.cc",
           "                    sliceElems(slotBytes_, t), fp.algorithm == Algorithm::HierDirect, &staging_,",
           "                    sliceElems(slotBytes_, t), false, &staging_,", "cpp",
           "TwoLevelPlans.SendWhereThePlanSays", binaries=("ring_tcp_tests",),
           why="a plan named in the fingerprint but not run: the results are right either way, "
               "only where the messages go shows it"),
    Mutant("plans_not_compared_at_set_up", "csrc/executor/communicator.cc",
           "    RING_USAGE_CHECK(theirs == mine,", "    RING_USAGE_CHECK(true || theirs == mine,",
           "cpp", "TwoLevelAllReduce.RanksWithDifferentPlans*", binaries=("ring_tcp_tests",),
           timeout=120,
           why="ranks that set different TORCH_RING_ALGO run different plans: a timeout, "
               "not an error naming the knob"),
    Mutant("model_rd_ignores_odd_host_counts", "torch_ring_backend/bench/model.py",
           "    steps = int(math.log2(power)) + (2 if power != hosts else 0)",
           "    steps = int(math.log2(power))", "py",
           "tests/python/test_scale_model.py -x -q", timeout=120,
           why="recursive doubling over 6 hosts priced as over 4: the plan choice favours it"),
    Mutant("all_gather_coalesced_transposed", "csrc/backend/ring_backend.cc",
           "out[r * n + i].view({-1})", "out[i * size_ + r].view({-1})", "py",
           "tests/python/test_gather_scatter_collectives.py -x -q -k coalesced",
           why="the all_gather_coalesced output lists the wrong way round"),
    Mutant("caller_thread_without_issue_check", "csrc/backend/ring_backend.cc",
           "  return comm.allIssued(seq + 1, patience);", "  return true;", "py",
           "tests/python/test_caller_thread.py -x -q -k opposite", timeout=200,
           why="a small call runs on the caller's thread before the peers issued it: ranks that "
               "issue two groups' calls in opposite orders deadlock until the timeout"),
    Mutant("caller_thread_never", "csrc/backend/ring_backend.cc",
           "  return comm.allIssued(seq + 1, patience);", "  return false;", "py",
           "tests/python/test_caller_thread.py -x -q -k small_call",
           why="small calls always pay the hand-off to the worker"),
    Mutant("direct_own_part_overwritten", "csrc/executor/direct_collectives.cc",
           "    if (m.pos >= 2) {", "    if (false) {", "cpp", "*CommunicatorInWorld.AllReduce*direct*",
           quick=True,
           why="a rank after the first two adds the running sum where its own part belongs"),
    Mutant("direct_algorithm_not_compared", "csrc/protocol/message_header.h",
           "op == o.op && algorithm == o.algorithm;", "op == o.op;", "cpp", "DirectThreshold.*",
           why="ranks configured with different TORCH_RING_DIRECT_BYTES are not told why"),
    Mutant("direct_threshold_strict", "csrc/executor/communicator.h",
           "bytes * (size_ - 1) <= directBytes_", "bytes * (size_ - 1) < directBytes_", "cpp",
           "DirectThreshold.*",
           why="a message of exactly TORCH_RING_DIRECT_BYTES in all goes around the ring"),
    Mutant("coalescing_not_fused", "csrc/backend/coalescing.cc",
           "  if (sameAllReduce) {", "  if (false) {", "py",
           "tests/python/test_backend_api.py -x -q -k coalescing",
           why="a coalesced block's all_reduces run one by one"),
    Mutant("premul_product_fused", "csrc/reduce/reduce_ops.h",
           "mulRounded(static_cast<double>(widen(x[i])), factor)",
           "static_cast<double>(widen(x[i])) * factor", "cpp",
           "HostKernelRounding.*", quick=True, binaries=("ring_host_kernel_tests",),
           why="float64 PREMUL_SUM's product is left to the compiler, which fuses it into the "
               "add (nvcc does by default): other bits than the CPU ranks'"),
    Mutant("cuda_watchdog_on_default_device", "csrc/executor/cuda_watchdog.cc",
           "const cudaError_t e = cudaSetDevice(device_);", "const cudaError_t e = cudaSuccess;",
           "cpp", "CudaEngine.TheWatchdogWorksOnItsGroupsDevice", quick=True,
           binaries=("ring_cuda_engine_tests",),
           why="the watchdog polls on its thread's default device: a context on device 0 for "
               "every rank of a multi-GPU host"),
    Mutant("staged_copies_skip_callers_stream", "csrc/executor/staged_copies.cc",
           "    callerReady.block(copies_, what_.c_str());\n", "", "cpp",
           "StagedCopies.TheCopiesInWaitForTheCallersStreamAndTheCallReturnsAtOnce",
           binaries=("ring_cuda_engine_tests",),
           why="a staged call copies its CUDA input before the caller's kernel that writes it"),
    Mutant("staged_wait_blocks_the_cpu", "csrc/executor/staged_copies.cc",
           "  lock.unlock();\n  blockStream(caller);",
           "  lock.unlock();\n  (void)cudaStreamSynchronize(copies_);\n  blockStream(caller);",
           "cpp", "StagedCopies.WaitReturnsBeforeTheCopiesBackAndTheCallersLaterWorkSeesThem",
           quick=True, binaries=("ring_cuda_engine_tests",),
           why="Work.wait() of a staged CUDA call blocks the CPU until the copies back land "
               "(NCCL's wait only orders the caller's stream)"),
    Mutant("staged_wait_skips_the_stream", "csrc/executor/staged_copies.cc",
           "  if (hostDone_) copiedBack_.block(caller, what_.c_str());", "", "cpp",
           "StagedCopies.WaitReturnsBeforeTheCopiesBackAndTheCallersLaterWorkSeesThem",
           binaries=("ring_cuda_engine_tests",),
           why="the caller's stream reads a staged call's output before the copy back lands"),
    Mutant("gpu_check_pytest_sigterm", "scripts/gpu_check_pytest.sh",
           "timeout -s INT -k", "timeout -s TERM -k", "py",
           "tests/python/test_gpu_check.py -x -q -k stopped_at_its_cap",
           why="a test phase stopped at its cap is killed before pytest writes its XML"),
    Mutant("gpu_probe_wait_ignored", "scripts/gpu_probe.py",
           "answer = answers.get(timeout=wait_s)", "answer = answers.get()", "py",
           "tests/python/test_gpu_check.py -x -q -k never_answers",
           why="the probe waits for a child that died as long as the phase's whole cap"),
    # The CUDA path's host code over the emulated runtime (tests/cpp/test_cuda_engine*.cc).
    Mutant("cuda_comm_stream_not_waiting", "csrc/executor/cuda_ring_engine.cc",
           "  checkCuda(cudaStreamWaitEvent(commStream_, ready_, 0), \"cudaStreamWaitEvent\",\n"
           "            \"ordering the comm stream after the caller's\");", "", "cpp",
           "CudaEngine.TheKernelStartsAfterTheCallersStream", quick=True,
           binaries=("ring_cuda_engine_tests",),
           why="the kernel does not wait for the caller's stream: it reduces a stale input"),
    Mutant("cuda_record_read_before_end_event", "csrc/executor/cuda_task.cc",
           "  cudaError_t q = cudaEventQuery(end_);",
           "  cudaError_t q = state_->links().errorRecord().status != kDeviceOk\n"
           "                      ? cudaSuccess : cudaEventQuery(end_);", "cpp",
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


# The end of the output of the last command that failed, for a failure on the unmutated tree
# (a mutant's failing tests are its expected outcome; the unmutated tree's need a diagnosis).
LAST_FAILURE_TAIL = ""


def run(cmd, timeout=None, env=None):
    global LAST_FAILURE_TAIL
    try:
        done = subprocess.run(cmd, cwd=TREE, timeout=timeout, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    except subprocess.TimeoutExpired as e:
        LAST_FAILURE_TAIL = (e.stdout or b"")[-4000:].decode(errors="replace")
        return "timeout"
    if done.returncode != 0:
        LAST_FAILURE_TAIL = done.stdout[-4000:].decode(errors="replace")
    return done.returncode


EXCLUDED = {"build", ".git", "__pycache__", ".pytest_cache"}


def _built_here(name):
    return name.endswith(".so") or name == "_C.torch_version"


def sync_tree():
    """Copies into the scratch tree every file whose content differs (with a fresh mtime, so an
    incremental build never keeps an object compiled from a mutant) and drops files gone here."""
    seen = set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in EXCLUDED]
        for name in files:
            if _built_here(name):
                continue
            rel = os.path.relpath(os.path.join(folder, name), ROOT)
            seen.add(rel)
            with open(os.path.join(ROOT, rel), "rb") as f:
                data = f.read()
            dest = os.path.join(TREE, rel)
            if os.path.exists(dest):
                with open(dest, "rb") as f:
                    if f.read() == data:
                        continue
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)
            shutil.copymode(os.path.join(ROOT, rel), dest)
    for folder, dirs, files in os.walk(TREE):
        dirs[:] = [d for d in dirs if d not in EXCLUDED]
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), TREE)
            if rel not in seen and not _built_here(name):
                os.remove(os.path.join(TREE, rel))


def build(kind, binaries=()):
    """Configures if needed, then builds incrementally what `kind` needs. Returns an error or ""."""
    jobs = str(os.cpu_count() or 2)
    if kind == "cpp":
        if not os.path.exists(os.path.join(CPP_BUILD, "build.ninja")):
            subprocess.check_call(["cmake", "-S", TREE, "-B", CPP_BUILD, "-G", "Ninja",
                                   "-DRING_BUILD_EXTENSION=OFF", "-DRING_BUILD_TESTS=ON",
                                   "-DRING_CUDA=AUTO"], stdout=subprocess.DEVNULL)
        targets = [b for b in binaries if b != "ring_cuda_host_tests" or shutil.which("nvcc")]
        rc = run(["cmake", "--build", CPP_BUILD, "-j", jobs, "--target", *targets])
        return "" if rc == 0 else f"cmake --build {CPP_BUILD} --target {' '.join(targets)}: {rc}"
    if kind == "tsan":
        return ""  # scripts/tsan.sh builds, then runs
    if kind == "py":
        if not os.path.exists(os.path.join(EXT_BUILD, "build.ninja")):
            subprocess.check_call(["cmake", "-S", TREE, "-B", EXT_BUILD, "-G", "Ninja",
                                   f"-DPython_EXECUTABLE={sys.executable}",
                                   "-DRING_BUILD_TESTS=OFF", "-DRING_CUDA=OFF"],
                                  stdout=subprocess.DEVNULL)
        rc = run(["cmake", "--build", EXT_BUILD, "--target", "_C", "-j", jobs])
        if rc != 0:
            return f"cmake --build {EXT_BUILD} --target _C: {rc}"
        pkg = os.path.join(TREE, "torch_ring_backend")
        for f in os.listdir(EXT_BUILD):
            if f.startswith("_C") and _built_here(f):
                shutil.copy2(os.path.join(EXT_BUILD, f), pkg)
        return ""
    raise ValueError(kind)


def test(m, timeout):
    """The failures of m's tests on the tree as it is now (an empty list: they all passed)."""
    if m.kind == "cpp":
        failed, matched = [], 0
        for binary in m.binaries:
            path = os.path.join(CPP_BUILD, binary)
            if binary == "ring_cuda_host_tests" and not os.path.exists(path):
                continue  # built only where nvcc exists
            listed = subprocess.run([path, f"--gtest_filter={m.tests}", "--gtest_list_tests"],
                                    capture_output=True, text=True).stdout
            if not any(line.startswith("  ") for line in listed.splitlines()):
                continue
            matched += 1
            rc = run([path, f"--gtest_filter={m.tests}"], timeout=timeout)
            if rc != 0:
                failed.append(f"{binary}: {rc}")
        if not matched:
            failed.append(f"no test of {m.binaries} matches {m.tests}")
        return failed
    if m.kind == "tsan":
        # The host kernels' binary only: tsan.sh's other two binaries (the emulated CUDA path
        # and the engine) test code no "tsan" mutant touches, and their timing-bound cases
        # are scripts/tsan.sh's own stage in CI.
        env = dict(os.environ, TSAN_BUILD_DIR=TSAN_BUILD, TSAN_FILTER=m.tests,
                   TSAN_EMULATED_FILTER="", TSAN_ENGINE_FILTER="")
        rc = run(["bash", "scripts/tsan.sh"], timeout=timeout, env=env)
        return [] if rc == 0 else [f"tsan: {rc}"]
    env = dict(os.environ, PYTHONPATH=TREE)
    where = subprocess.run([sys.executable, "-c",
                            "import torch_ring_backend as t; print(t.__file__)"],
                           env=env, cwd=TREE, capture_output=True, text=True).stdout.strip()
    if not where.startswith(TREE):
        return [f"the tests import torch_ring_backend from {where!r}, not from {TREE}"]
    rc = run([sys.executable, "-m", "pytest", *m.tests.split()], timeout=timeout, env=env)
    return [] if rc == 0 else [f"pytest: {rc}"]


def _place(in_place):
    global TREE, CPP_BUILD, TSAN_BUILD, EXT_BUILD
    if in_place:
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout
        if dirty:
            sys.exit(f"mutate: --in-place needs a checkout without changes; changed:\n{dirty}")
        TREE = ROOT
        CPP_BUILD = os.path.join(ROOT, "build", "cpp-tests")   # scripts/test.sh's
        TSAN_BUILD = os.path.join(ROOT, "build", "tsan")       # scripts/tsan.sh's
        EXT_BUILD = os.path.join(SCRATCH, "ext")
    else:
        TREE = os.path.join(SCRATCH, "tree")
        CPP_BUILD = os.path.join(SCRATCH, "cpp")
        TSAN_BUILD = os.path.join(SCRATCH, "tsan")
        EXT_BUILD = os.path.join(SCRATCH, "ext")
        os.makedirs(TREE, exist_ok=True)
        sync_tree()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="the CI subset")
    p.add_argument("--only", nargs="*", help="these mutants")
    p.add_argument("--in-place", action="store_true",
                   help="mutate this checkout (clean) with scripts/test.sh's build folders")
    p.add_argument("--timeout", type=int, default=300, help="seconds per mutant's tests")
    args = p.parse_args(argv)
    chosen = [m for m in MUTANTS if (not args.quick or m.quick) and
              (not args.only or m.name in args.only)]
    if not chosen:
        sys.exit("mutate: no mutant chosen")
    _place(args.in_place)
    # A SIGTERM (a CI time limit) must still restore the mutated file: make it an exception.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("mutate: terminated"))

    start = time.monotonic()
    for kind in sorted({m.kind for m in chosen}):
        binaries = sorted({b for m in chosen if m.kind == kind for b in m.binaries})
        err = build(kind, binaries)
        if err:
            print(f"mutate: the unmutated tree does not build: {err}")
            return 2
    for m in chosen:
        failed = test(m, args.timeout)
        if failed:
            print(f"mutate: the tests of {m.name} fail on the unmutated tree: {failed}; the end "
                  f"of the failing command's output:\n{LAST_FAILURE_TAIL}")
            return 2
    print(f"mutate: the unmutated tree builds and passes every chosen test "
          f"({time.monotonic() - start:.0f} s)", flush=True)

    results = []
    for m in chosen:
        path = os.path.join(TREE, m.path)
        with open(path) as f:
            original = f.read()
        if original.count(m.find) != 1:
            print(f"mutate: {m.name}: the text to change occurs {original.count(m.find)} times "
                  f"in {m.path}")
            return 2
        began = time.monotonic()
        try:
            with open(path, "w") as f:
                f.write(original.replace(m.find, m.replace))
            # A mutant that does not compile tells nothing about the tests: it is an error of
            # this list, not a kill.
            err = build(m.kind, m.binaries)
            if err:
                print(f"mutate: {m.name} does not build ({err}): fix the mutant")
                return 2
            failed = test(m, min(args.timeout, m.timeout or args.timeout))
        finally:
            with open(path, "w") as f:
                f.write(original)
        verdict = "KILLED" if failed else "SURVIVED"
        results.append((m, verdict))
        detail = f"  [{'; '.join(failed)}]" if failed else ""
        print(f"{verdict:8} {m.name:32} {time.monotonic() - began:4.0f} s  {m.why}{detail}",
              flush=True)
    survived = [m.name for m, v in results if v == "SURVIVED"]
    print(f"mutate: {len(results) - len(survived)} of {len(results)} mutants killed in "
          f"{time.monotonic() - start:.0f} s" + (f"; SURVIVED: {survived}" if survived else ""))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
