"""The mutants of a call's path and plan: mailbox rounds and the message posted ahead of a
call, the call as data (issue 48), inference_all_reduce, the plan chosen in one place and the
knob table, sparse all_reduce, torch 2.14's reconfigure and torch's time estimator. Part of
mutants.py's list."""
from mutant_type import Mutant

CALL_PATH_MUTANTS = [
    # Mailbox rounds (transport/link.h, Mailbox).
    Mutant("mailbox_one_buffer", "csrc/transport/shm/shm_mailbox.cc",
           "static_cast<size_t>(round % 2) * bufferBytes_",
           "static_cast<size_t>(round % 1) * bufferBytes_",
           "cpp", "MailboxRounds.ManyRounds*", quick=True,
           why="one buffer instead of two: a rank posts its next round while a peer still "
               "reads the last"),
    Mutant("mailbox_posted_else_unchecked", "csrc/executor/communicator_calls.h",
           "    if (Mailbox* box = t->mailbox()) box->checkPeerNotAhead(peer, fp);",
           "    (void)fp;", "cpp", "MailboxRounds.RanksThatDisagree*",
           why="a rank waiting on a FIFO does not look at its peer's mailbox: a peer in a round "
               "for another collective and this rank wait for each other until the timeout"),
    Mutant("mailbox_fifo_not_watched", "csrc/transport/shm/shm_mailbox.cc",
           "  InSlot slot;\n  if (!owner_", "  InSlot slot;\n  return;\n  if (!owner_", "cpp",
           "MailboxRounds.APeerThatSentThroughAFifo*",
           why="a rank in a round does not look at its FIFOs: a peer that sent this sequence "
               "number through them and went idle leaves it waiting until the timeout"),
    Mutant("mailbox_barrier_fetches_nothing", "csrc/executor/direct_collectives.cc",
           "  for (int k = 1; k < m.size; ++k) round.receive((m.pos - k + m.size) % m.size, 0, 0, fp, ctx);",
           "", "cpp", "MailboxRounds.BarrierWaitsForEveryRank",
           why="a barrier that only posts lets a rank leave before the others arrive"),
    Mutant("mailbox_parts_out_of_rank_order", "csrc/executor/direct_collectives.cc",
           "      part[static_cast<size_t>(peer)] = round.receive(peer, bytes, slice, fp, ctx);",
           "      part[static_cast<size_t>((m.pos + k) % n)] = round.receive(peer, bytes, slice, fp, ctx);", "cpp",
           "DirectAllReduce.FloatSumsFollowRankOrderAndAgreeBitwise",
           why="the peers' parts swapped (from 3 ranks on): a float sum in another order on each "
               "rank, different bits"),
    Mutant("leaders_model_passes_one_block_down", "torch_ring_backend/bench/model.py",
           "    down = max(_chain(hosts * block, c - 1, intra, slot) for c in counts)",
           "    down = max(_chain(block, c - 1, intra, slot) for c in counts)", "py",
           "tests/python/test_scale_model.py -x -q -k unequal",
           why="the model's leaders' all_gather passes only the host's own block down its "
               "host, not every host's"),
    # A call's mailbox message posted ahead of the call (Communicator::prepare, post).
    Mutant("posted_call_posts_again", "csrc/executor/reducing_collectives.cc",
           "  MailboxRound links(*p.box, rank_, size_, p.posted);\n  directAllReduce",
           "  MailboxRound links(*p.box, rank_, size_, false);\n  directAllReduce",
           "cpp", "PostedAhead.AllReduce*",
           why="an all_reduce posted ahead posts its message again when it runs: its rounds run "
               "one ahead of its peers'"),
    Mutant("posted_gather_posts_again", "csrc/executor/moving_collectives.cc",
           "MailboxRound links(*p.box, rank_, size_, p.posted);",
           "MailboxRound links(*p.box, rank_, size_, false);",
           "cpp", "PostedAhead.AllGather*",
           why="an all_gather posted ahead posts its part again when it runs"),
    Mutant("posted_premul_unscaled", "csrc/executor/communicator_issue.cc",
           "  premultiplied(p, input, output, nullptr);\n",
           "", "cpp", "PostedAhead.AllReduce*",
           why="a PREMUL_SUM posted ahead sends its contribution unscaled"),
    Mutant("posted_premul_scaled_again", "csrc/executor/communicator_issue.cc",
           "    if (!p.posted) scaleFn(a.dtype)(output", "    scaleFn(a.dtype)(output",
           "cpp", "PostedAhead.AllReduce*",
           why="a PREMUL_SUM posted ahead (its message scaled at the post) scales this rank's "
               "tensor again when it runs: the factor applied twice to its own part"),
    Mutant("posted_into_a_broken_group", "csrc/executor/communicator_issue.cc",
           "  transport_->checkHealth(kHealthBetweenCalls);\n  // What the all_reduce",
           "  // What the all_reduce", "cpp",
           "PostedAhead.NothingIsPostedIntoABrokenGroup",
           why="a rank whose group broke posts its next all_reduce ahead anyway: a peer waiting "
               "in that round completes on it as if the group were whole"),
    Mutant("posted_asks_posts_only", "csrc/executor/communicator_issue.cc",
           "    return pollFor(patience, allPosted) || transport_->allIssued(count);",
           "    return pollFor(patience, allPosted);", "cpp",
           "PostedAhead.AskingLooks*",
           why="after a post ahead, a peer that has issued the call but not posted it (its "
               "thread is still in an earlier call) sends the call to the worker"),
    # Issue 48: the call as data (executor/prepared_call.h), planned once at issue, run by the
    # group; the issue times and the set-up's choices out of the Communicator.
    Mutant("prepared_plan_ignored_at_run", "csrc/executor/communicator_issue.cc",
           "  if (c.prepared == nullptr) {\n    const PreparedCall p = prepare(args, c.seq);",
           "  if (true) {\n    const PreparedCall p = prepare(args, c.seq);", "cpp", "PostedAhead.*",
           why="a call handed to the group with the plan its runner prepared is planned again: "
               "a call posted ahead would run under a plan that was never posted (guarded() "
               "names it), and its message would go out a second time"),
    Mutant("prepared_plan_of_another_call_runs", "csrc/executor/communicator_issue.cc",
           "  RING_ASSERT(p.seq == c.seq && p.args == args,", "  RING_ASSERT(true,", "cpp",
           "PreparedCall.*",
           why="a call handed the plan prepared for another (another count) runs under it"),
    Mutant("prepared_plan_run_at_another_sequence", "csrc/executor/communicator_issue.cc",
           "  RING_ASSERT(p.function != nullptr && p.seq == c.seq, collectiveName(p.args.kind),",
           "  RING_ASSERT(p.function != nullptr, collectiveName(p.args.kind),", "cpp",
           "PreparedCall.*",
           why="a plan prepared for one sequence runs at another: its messages carry the other "
               "call's sequence, and the peers take them for that call's"),
    Mutant("prepared_broadcast_from_rank_zero", "csrc/executor/moving_collectives.cc",
           "planBroadcast(size_, rank_, a.root, a.count,",
           "planBroadcast(size_, rank_, 0, a.count,", "cpp", "PreparedCall.*",
           why="the ring's plan function of a prepared broadcast loses its root"),
    Mutant("prepared_gather_runs_as_scatter", "csrc/executor/communicator_issue.cc",
           "      {C::Gather, A::Ring, false, &R::gatherPairwise, price::pairwise},",
           "      {C::Gather, A::Ring, false, &R::scatterPairwise, price::pairwise},", "cpp",
           "PreparedCall.*",
           why="the table of plan functions runs a gather as the scatter of its buffers"),
    # Issue 69: the plan picks the function (planRow), and what every collective does
    # around its plan is done once (run: premultiplied; oneRank).
    Mutant("two_level_all_reduce_runs_the_flat_ring", "csrc/executor/communicator_issue.cc",
           "      {C::AllReduce, A::HierRing, false, &R::allReduceTwoLevels, price::twoLevelAllReduce},",
           "      {C::AllReduce, A::HierRing, false, &R::allReduceRing, price::twoLevelAllReduce},",
           "cpp",
           "TwoLevelAllReduce.AutoTakesTheRingItPricesLowerAndRunsIt",
           binaries=("ring_tcp_tests",),
           why="an all_reduce whose fingerprint names two levels runs the flat ring: the sums "
               "are right, in the flat ring's order, so the two plans' bits agree where they "
               "must differ"),
    # Issue 69: one enum and one table of algorithms (protocol/algorithms.h).
    Mutant("knob_forces_the_direct_round", "csrc/executor/plan_choice.cc",
           "    if (!row.forcible) continue;\n", "", "cpp", "PlanChoice.*",
           quick=True,
           why="TORCH_RING_ALGO=direct is taken: a knob forces the direct round inside one host, "
               "which only fits where the message fits one slot"),
    Mutant("unknown_algorithm_read_past_the_table", "csrc/protocol/message_header.cc",
           "  s += algorithm < kAlgorithmCount ? std::string(kAlgorithms[algorithm].described)",
           "  s += true ? std::string(kAlgorithms[algorithm].described)", "cpp",
           "MessageHeader.*",
           why="a corrupt header's algorithm number is read as a row past the table's end: "
               "garbage (or a crash) in the error instead of the number"),
    Mutant("rounds_priced_as_the_direct_round", "csrc/executor/communicator_issue.cc",
           "      {C::AllReduce, A::HierRd, false, &R::allReduceTwoLevels, price::leadersRounds},",
           "      {C::AllReduce, A::HierRd, false, &R::allReduceTwoLevels, price::leadersDirectRound},",
           "cpp", "TimeEstimate.*", binaries=("ring_tcp_tests",),
           why="torch's time estimator prices recursive doubling between hosts as one direct "
               "round: on three hosts it leaves out the folded host's two exchanges"),
    Mutant("direct_round_priced_as_the_ring", "csrc/executor/communicator_issue.cc",
           "      {C::AllReduce, A::Direct, false, &R::allReduceDirect, price::directRound},",
           "      {C::AllReduce, A::Direct, false, &R::allReduceDirect, price::flatAllReduce},",
           "cpp", "TimeEstimate.*", binaries=("ring_tcp_tests",),
           why="a direct round inside one host past the mailbox is priced as the ring it does "
               "not take"),
    Mutant("two_level_all_gather_priced_as_the_flat_ring", "csrc/executor/communicator_issue.cc",
           "      {C::AllGather, A::HierRing, false, &R::allGatherTwoLevels, price::twoLevelAllGather},",
           "      {C::AllGather, A::HierRing, false, &R::allGatherTwoLevels, price::flatAllGather},",
           "cpp", "TimeEstimate.*", binaries=("ring_tcp_tests",),
           why="an all_gather in two levels is priced as the flat ring it does not run"),
    Mutant("premul_scales_one_block_of_a_reduce_scatter", "csrc/executor/communicator_issue.cc",
           "  scaleFn(a.dtype)(scaled->data(), input, a.factor, count);",
           "  scaleFn(a.dtype)(scaled->data(), input, a.factor, a.count);", "cpp",
           "PreparedCall.PremulSum*",
           why="PREMUL_SUM's copy of a reduce_scatter's input scales its first block only: the "
               "other blocks go into the sum as zeros"),
    Mutant("one_rank_copies_nothing", "csrc/executor/reducing_collectives.cc",
           "  if (!inPlace && bytes > 0 && in != out) std::memmove(out, in, bytes);\n", "",
           "cpp", "PreparedCall.*",
           why="on a group of one rank the collectives that are not in place leave their output "
               "as it was: an all_gather, reduce_scatter, gather or scatter of one rank must "
               "copy its input there"),
    Mutant("gather_single_to_rank_zero", "csrc/backend/ring_backend_lists.cc",
           "CollectiveArgs::gather(input.numel(), d, root)});",
           "CollectiveArgs::gather(input.numel(), d, 0)});", "py",
           "tests/python/test_collectives.py -x -q -k gather_to_every_root", timeout=600,
           why="gather_single, described as data, names rank 0 its root whatever dst the user "
               "passed: rank 0 gathers into an output it was never given, the root's stays "
               "unwritten"),
    # torch_ring_backend.inference_all_reduce (RingBackend::allReduceNow).
    Mutant("inference_returns_before_done", "csrc/backend/ring_backend.cc",
           "  allreduce(one, opts)->wait();", "  allreduce(one, opts);", "py",
           "tests/python/test_inference_all_reduce.py -x -q -k results", timeout=600,
           why="inference_all_reduce returns as soon as its call is queued: a call handed to "
               "the worker is not done when the caller reads the tensor"),
    Mutant("inference_serves_the_first_group", "torch_ring_backend/__init__.py",
           "    if served is not pg:", "    if served is None:", "py",
           "tests/python/test_inference_all_reduce.py -x -q -k results", timeout=600,
           why="inference_all_reduce keeps the backend of the first group it served: a call on "
               "a subgroup runs on the whole world"),
    Mutant("inference_in_a_coalescing_block", "csrc/backend/ring_backend.cc",
           "  if (coalescer_.active()) {\n    failUsage(s, \"called inside a coalescing block",
           "  if (false) {\n    failUsage(s, \"called inside a coalescing block", "py",
           "tests/python/test_inference_all_reduce.py -x -q -k refused", timeout=600,
           why="inference_all_reduce inside a coalescing block waits for a call that runs only "
               "at the block's end: it never returns"),
    Mutant("timed_wait_runs_the_call", "csrc/backend/work_queue.cc",
           "  if (timeout != ::kNoTimeout) return;", "", "py",
           "tests/python/test_caller_thread.py -x -q -k own_timeout", timeout=300,
           why="a Work.wait(timeout) runs the queued call on its thread: it returns when the "
               "call ends (up to the group's timeout), not at its own timeout"),
    Mutant("runner_announces_nothing", "csrc/backend/work_queue.cc",
           "    group_.announceIssued(task.call.seq + 1);\n", "", "py",
           "tests/python/test_caller_thread.py -x -q -k small_call", timeout=300,
           why="the runner never tells the peers a call was issued: no small call runs on its "
               "caller's thread"),
    Mutant("issue_times_never_collected", "csrc/executor/straggler_stats.cc",
           "  while (next < count && t.issueTimes(next, &scratch_)) {",
           "  while (false && t.issueTimes(next, &scratch_)) {", "cpp",
           "StragglerStats.TheCommunicatorsSeeALateRank",
           why="the issue times are announced but never read: no rank is ever late"),
    Mutant("issue_times_read_only_at_report", "csrc/executor/straggler_stats.h",
           "    if (count >= next_.load(std::memory_order_relaxed) + kBatch) read(t, count);",
           "    (void)t;\n    (void)count;", "cpp",
           "StragglerStats.TheReportCoversMoreCollectivesThanTheTransportKeeps",
           why="the issue times are read only when a report asks: it covers the last 32 "
               "collectives, not the window"),
    # Issue 48: the plan of a call, chosen in one place and recorded; the knobs in one table.
    Mutant("plan_mailbox_never", "csrc/executor/plan_choice.h",
           "    p.mailboxRound = bytes <= s.mailboxBytes;", "    p.mailboxRound = false;", "py",
           "tests/python/test_call_plan.py -x -q", timeout=200,
           why="a direct round small enough for the mailboxes goes through the FIFOs: the "
               "protocol TORCH_RING_LL_BYTES chooses is ignored"),
    Mutant("one_host_barrier_takes_the_ring", "csrc/executor/plan_choice.h",
           "if (k != Collective::Barrier && !s.forced && layout.hosts() <= 1) {",
           "if (!s.forced && layout.hosts() <= 1) {", "cpp", "PlanChoice.*",
           quick=True,
           why="inside one host a barrier is planned as the flat ring: its one mailbox round is "
               "lost"),
    Mutant("one_host_ignores_the_plan_knob", "csrc/executor/plan_choice.h",
           "if (k != Collective::Barrier && !s.forced && layout.hosts() <= 1) {",
           "if (k != Collective::Barrier && layout.hosts() <= 1) {", "cpp", "PlanChoice.*",
           why="inside one host TORCH_RING_ALGO=hier_ring is ignored: the flat ring runs"),
    Mutant("recorder_keeps_earlier_shapes", "csrc/executor/flight_recorder.cc",
           "  sizes.resize(side.count);",
           "  if (sizes.size() < side.count) sizes.resize(side.count);", "cpp", "FlightRecorder.*",
           why="a reused entry lists the tensors of the call it replaced beyond this call's own"),
    Mutant("recorder_inputs_shown_as_outputs", "csrc/backend/work_queue.cc",
           "viewShapes(task.inputs, in, inList),",
           "viewShapes(task.outputs, in, inList),", "py",
           "tests/python/test_fr_dump.py -x -q -k tensor_forms", timeout=200,
           why="the dump's input_sizes are the outputs' (fr_trace compares them across ranks)"),
    Mutant("plan_direct_budget_ignores_ranks", "csrc/executor/plan_choice.h",
           "bytes * (s.ranks - 1) <= s.directBytes;", "bytes <= s.directBytes;", "py",
           "tests/python/test_call_plan.py -x -q", timeout=200,
           why="the direct round's budget counts one message, not the n-1 a rank sends: larger "
               "groups take it past the size where the ring is faster"),
    Mutant("plan_not_recorded", "csrc/backend/work_queue.cc",
           "  recorder_.markEnded(id, what, end, plan);", "  recorder_.markEnded(id, what, end);",
           "py", "tests/python/test_call_plan.py -x -q", timeout=200,
           why="the flight recorder does not say which plan a call took"),
    Mutant("knob_default_drifts_from_readme", "csrc/common/knob_table.cc",
           'integer("TORCH_RING_SLOTS", "4", S::EveryRankAlike, 4, 2, 64)',
           'integer("TORCH_RING_SLOTS", "8", S::EveryRankAlike, 8, 2, 64)', "py",
           "tests/python/test_knob_table.py -x -q", timeout=200,
           why="the code's default of a knob is no longer the one README promises"),
    # Sparse all_reduce (backend/sparse_all_reduce.cc).
    Mutant("sparse_padding_summed_in", "csrc/backend/sparse_all_reduce.cc",
           "const int64_t count = all[r * kHeader + kNonzeros];", "const int64_t count = widest;",
           "py", "tests/python/test_sparse_all_reduce.py -x -q -k gloos_result",
           why="the zeros that pad a rank's part to the widest become entries of the sum: indices "
               "gloo's result does not have"),
    Mutant("sparse_shapes_not_compared", "csrc/backend/sparse_all_reduce.cc",
           "    if (!sameShape(theirs, h)) {", "    if (false) {", "py",
           "tests/python/test_sparse_all_reduce.py -x -q -k refuses",
           why="ranks with sparse tensors of different shapes sum them anyway, silently"),
    # torch 2.14's reconfigure (backend/ring_backend_reconfigure.cc).
    Mutant("reconfigure_keeps_the_old_size", "csrc/backend/ring_backend_reconfigure.cc",
           "  size_ = newSize;\n", "", "py", "tests/python/test_reconfigure.py -x -q",
           why="after a reconfigure torch still sees the old world size (get_world_size, the "
               "links' count)"),
    Mutant("reconfigure_uuid_never_claimed", "csrc/backend/ring_backend_reconfigure.cc",
           "  if (newRank == 0) {\n    const std::string claimedBy",
           "  if (false) {\n    const std::string claimedBy", "py",
           "tests/python/test_reconfigure.py -x -q",
           why="a reused uuid is not refused: the members meet among the stale keys of an "
               "earlier membership"),
    Mutant("reconfigure_failure_forgotten", "csrc/backend/ring_backend_reconfigure.cc",
           "    reconfigureFailure_ = strCat(", "    if (false) reconfigureFailure_ = strCat(",
           "py", "tests/python/test_reconfigure.py -x -q",
           why="after a failed reconfigure, calls blame enable_reconfigure instead of the "
               "reconfigure that failed"),
    # torch's _time_estimator (backend/ring_backend_estimate.cc, time_estimate.cc).
    Mutant("estimated_call_runs_anyway", "csrc/backend/ring_backend.cc",
           "  if (estimate_.open()) return {Route::Priced};\n", "",
           "py", "tests/python/test_time_estimate.py -x -q",
           why="a call inside the estimator moves data (and is recorded) instead of being priced"),
    Mutant("estimate_in_seconds", "csrc/backend/time_estimate.cc",
           "  return static_cast<float>(seconds_ * 1e6);",
           "  return static_cast<float>(seconds_);", "py",
           "tests/python/test_time_estimate.py -x -q",
           why="the estimate comes back in seconds where torch (as NCCL) reads microseconds"),
    Mutant("time_estimators_nest", "csrc/backend/time_estimate.cc",
           "  if (open_.load()) failUsage(s, \"already estimating: time estimators do not nest\");\n",
           "", "py", "tests/python/test_time_estimate.py -x -q",
           why="a time estimator opened inside another restarts its sum: the outer one's "
               "estimate loses the calls priced before it"),
    # The barrier through the same run() as every host call (backend/ring_backend.cc).
    Mutant("barrier_around_run", "csrc/backend/ring_backend.cc",
           "  return run(s, std::move(call));\n}\n\n}  // namespace ring",
           "  return push(s.collective, seq_++, std::move(call), nullptr, true);\n}\n\n"
           "}  // namespace ring", "py", "tests/python/test_time_estimate.py -x -q",
           why="a barrier inside torch's time estimator runs (and is recorded) instead of "
               "being priced, as it did before it went through run()"),
    Mutant("barrier_held_in_a_block", "csrc/backend/ring_backend.cc",
           "    const bool held = coalescer_.active() && type != c10d::OpType::BARRIER;",
           "    const bool held = coalescer_.active();", "py",
           "tests/python/test_backend_api.py -x -q -k coalesc",
           why="a barrier inside a coalescing block is held for the block's end: its wait "
               "returns at once and it holds no rank back"),
]
