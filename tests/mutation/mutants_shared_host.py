"""The mutants of what ranks of one host share: same-host liveness (the heartbeat), the fit of
the shared-memory inboxes to /dev/shm, and the groups made anew over a store (merge). Part of
mutants.py's list."""
from mutant_type import Mutant

SHARED_HOST_MUTANTS = [
    # Same-host liveness (transport/shm/heartbeat.cc, shm_transport.cc).
    Mutant("same_host_heartbeat_never_advances", "csrc/transport/shm/heartbeat.cc",
           "w->fetch_add(1, std::memory_order_relaxed);", "w->fetch_add(0, std::memory_order_relaxed);",
           "py", "tests/python/test_faults.py -x -q -k late_but_live", timeout=300,
           why="a live rank's heartbeat stands still: a rank late by a few seconds is taken for "
               "a stopped one and the group breaks"),
    Mutant("heartbeat_child_keeps_its_parents_words", "csrc/transport/shm/heartbeat.cc",
           "  s.words.clear();", "", "cpp", "Heartbeat*",
           why="a forked child's beat thread beats the words its parent registered: a stopped "
               "parent would look alive while its child runs"),
    Mutant("same_host_silence_never_checked", "csrc/transport/shm/shm_transport.cc",
           "  if (silenceBound_.count() == 0) return {};", "  if (silenceBound_.count() >= 0) return {};",
           "py", "tests/python/test_faults.py -x -q -k stopped_rank_on_the_same_host", timeout=300,
           why="a rank stopped by SIGSTOP on the same host is waited for until the group's "
               "timeout (300 s in the test) instead of named within seconds"),
    # The shared-memory footprint (transport/shm/shm_footprint.cc, shm_layout.h).
    Mutant("shm_fit_ignores_the_free_space", "csrc/transport/shm/shm_footprint.cc",
           "  return std::min(static_cast<int64_t>(nlocal) * kShmBytesPerRank, room.freeBytes / 2);",
           "  return static_cast<int64_t>(nlocal) * kShmBytesPerRank;",
           "py", "tests/python/test_shm_budget.py -x -q -k dockers_default", timeout=300,
           why="set-up sizes the inboxes without looking at /dev/shm: 8 ranks in Docker's "
               "64 MiB fail to start, as before the fit"),
    Mutant("shm_fit_keeps_a_budget_it_cannot_meet", "csrc/transport/shm/shm_footprint.cc",
           "    if (static_cast<int64_t>(g.hostBytes()) <= fit.budget) {",
           "    if (static_cast<int64_t>(g.hostBytes()) <= fit.budget || g.slots == 2) {",
           "cpp", "ShmFootprint.*",
           why="the first two-slot step is taken whether it fits or not: a budget is exceeded "
               "silently"),
    Mutant("shm_inbox_keeps_a_fifo_for_its_owner", "csrc/transport/shm/shm_layout.h",
           "  int sendersPerInbox() const { return nranks > 1 ? nranks - 1 : 0; }",
           "  int sendersPerInbox() const { return nranks; }",
           "cpp", "ShmFootprint.*",
           why="every inbox keeps the FIFO its owner never writes (layout 6): a rank maps 2 "
               "FIFOs more than it uses"),
    Mutant("merge_keeps_the_parents_size", "csrc/backend/ring_backend_group.cc",
           "  return c10::make_intrusive<RingBackend>(store, rank, size, options);",
           "  return c10::make_intrusive<RingBackend>(store, rank % size_, size_, options);",
           "py", "tests/python/test_merge_remote_group.py -x -q", timeout=300,
           why="the merged backend is set up over the parent group's size: each half merges "
               "with itself only"),
    # NUMA placement (common/numa_topology.cc, transport/shm/shm_segment.cc, select.cc).
    Mutant("numa_ranks_dealt_round_robin", "csrc/common/numa_topology.cc",
           "  const size_t k = static_cast<size_t>(static_cast<int64_t>(localIndex) *\n"
           "                                       static_cast<int64_t>(reached.size()) / localRanks);",
           "  const size_t k = static_cast<size_t>(localIndex) % reached.size();",
           "cpp", "NumaTopology.*",
           why="ranks are dealt over the nodes in turn: 4 ranks on 2 nodes cross between them on "
               "every hop of the ring"),
    Mutant("numa_policy_not_put_back", "csrc/transport/shm/shm_segment.cc",
           "  } putBack{oldMode, oldMask};", "  } putBack{oldMode, oldMask};\n  putBack.mode = -1;",
           "cpp", "NumaPlacement.*",
           why="the thread that created an inbox keeps preferring its node for everything it "
               "allocates afterwards"),
    Mutant("numa_inbox_not_placed", "csrc/transport/select.cc",
           "    const int node = opts.inboxNode ? opts.inboxNode(c.machineIndex, c.machineRanks) : -1;",
           "    const int node = -1;", "py",
           "tests/python/test_numa_bind.py -x -q -k two_ranks", timeout=300,
           why="TORCH_RING_CPU_BIND=numa binds the threads but leaves every inbox where the "
               "kernel puts it"),
    # Single-copy messages (executor/cpu_executor.cc, transport/stamped_link.h, shm_transport.cc).
    Mutant("single_copy_sender_returns_before_its_reader", "csrc/executor/cpu_executor.cc",
           "  if (next != nullptr) next->waitLentRead(ctx);", "", "cpp", "SingleCopy*",
           why="a ring step's sender returns while its receiver still reads what it lent: the "
               "caller's next write to its buffer reaches the peer"),
    Mutant("single_copy_lends_what_a_reduction_reads", "csrc/executor/cpu_executor.cc",
           "  const bool sendsAreFinal = io.combine == nullptr;",
           "  const bool sendsAreFinal = true;", "cpp", "SingleCopy*",
           why="an all_reduce's first step lends data its receiver must sum, not copy"),
    Mutant("single_copy_never_taken", "csrc/transport/stamped_link.h",
           "  bool lends(int64_t bytes) const { return lendsFrom_ >= 0 && bytes >= lendsFrom_; }",
           "  bool lends(int64_t bytes) const { return false && bytes >= lendsFrom_; }",
           "cpp", "SingleCopy*",
           why="TORCH_RING_SINGLE_COPY_BYTES is set and logged, and every message still goes "
               "through the slots"),
    Mutant("single_copy_probe_ignored", "csrc/transport/shm/shm_transport.cc",
           "    const uint32_t reads = probeRefused_[static_cast<size_t>(i)].empty() ? 1 : 0;",
           "    const uint32_t reads = 1;", "py",
           "tests/python/test_single_copy.py -x -q -k forbids", timeout=300,
           why="a rank whose seccomp profile forbids process_vm_readv is lent messages it "
               "cannot read: every call fails"),
]
