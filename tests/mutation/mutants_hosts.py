"""The mutants of the plans across hosts: auto's prices on hosts of unequal size, the scale
model (torch_ring_backend/bench/model.py) and its C++ twin (csrc/schedule/ring_costs.cc), and the
emulated links the multi-host benchmarks run on. Part of mutants.py's list."""
from mutant_type import Mutant

HOST_MUTANTS = [
    # auto's all_reduce on hosts of unequal size (plan_choice.cc, ring_costs.cc).
    Mutant("unequal_hosts_priced_as_equal", "csrc/executor/plan_choice.cc",
           "  if (layout.ranksPerHost() == 0) return cheapestOnUnequalHosts(s, layout, bytes);\n",
           "", "cpp", "PlanChoice.*",
           why="auto on hosts of unequal size takes recursive doubling by its byte rule, "
               "1.6-1.9x the flat ring's time on 3+1+2 hosts"),
    Mutant("segments_priced_in_parallel", "csrc/schedule/ring_costs.cc",
           "    for (int o : seg.owners) start = std::max(start, freeAt[static_cast<size_t>(o)]);",
           "    start = freeAt[static_cast<size_t>(seg.owners[0])];", "cpp", "PlanChoice.*",
           why="a segment is priced as starting when its first host's owner is free, not its "
               "last: the lone rank's segments would overlap"),
    Mutant("leaders_keep_the_result", "csrc/executor/hier_all_reduce.cc",
           "    runRingPlanAmong(t, ranks, local, planBroadcast(localRanks, local, 0, count, "
           "sliceElems),\n                     copy, fp, ctx);",
           "    (void)copy;", "cpp", "Plans/EveryPlan.*", binaries=("ring_tcp_tests",),
           why="on hosts of unequal size the leaders' all_reduce never goes down its host: "
               "the other ranks keep their host's partial sums"),
    Mutant("leaders_priced_without_the_chain_down", "csrc/schedule/ring_costs.cc",
           "  return inside + across + inside;", "  return inside + across;", "cpp",
           "PlanChoice.*",
           why="the rounds through the leaders are priced without the chain that takes the "
               "result down each host"),
    Mutant("model_rounds_through_the_segments", "torch_ring_backend/bench/model.py",
           "    if unequal and plan == \"hier-ring\":\n        return _segmented(",
           "    if unequal:\n        return _segmented(", "py",
           "tests/python/test_scale_model.py -x -q", timeout=120,
           why="the model prices the rounds on hosts of unequal size as the segments' ring "
               "(the plan they no longer run)"),
    Mutant("flat_loops_priced_over_the_network", "csrc/schedule/ring_costs.cc",
           "return loops * std::max(chain, throughSlowest);",
           "return std::max(chain + (loops - 1) * hops * stepSeconds(piece, slowest), "
           "loops * throughSlowest);", "cpp", "PlanChoice.*",
           why="the flat ring's further pipeline loops are priced as if every hop crossed the "
               "network (the model before it followed the executor's loops)"),
    Mutant("model_flat_loops_priced_over_the_network", "torch_ring_backend/bench/model.py",
           "return loops * max(chain, through_slowest)",
           "return max(chain + (loops - 1) * hops * _step(piece, slowest), "
           "loops * through_slowest)", "py",
           "tests/python/test_scale_model.py -x -q", timeout=120,
           why="the same in the model"),
    Mutant("leaders_direct_round_never_priced", "csrc/executor/plan_choice.cc",
           "if (leadersAllReduceSeconds(shape, layout, b, direct) < best) {",
           "if (false && leadersAllReduceSeconds(shape, layout, b, direct) < best) {", "cpp",
           "PlanChoice.*:*EveryPlan*", binaries=("ring_unit_tests", "ring_tcp_tests"),
           why="auto on hosts of unequal size never takes the leaders' direct round past its "
               "byte budget, where it is the cheapest plan"),
    Mutant("model_leaders_direct_round_never_priced", "torch_ring_backend/bench/model.py",
           "            if _leaders_all_reduce(\"hier-direct\", size, counts, intra, inter, slot) < best:",
           "            if False:", "py", "tests/python/test_scale_model.py -x -q", timeout=120,
           why="the same in the model"),
    Mutant("leaders_direct_round_priced_as_one_slice", "csrc/schedule/ring_costs.cc",
           "across = loops * stepSeconds(piece * (layout.hosts() - 1), s.net);",
           "across = stepSeconds(bytes * (layout.hosts() - 1), s.net);", "cpp",
           "PlanChoice.*:*EveryPlan*", binaries=("ring_unit_tests", "ring_tcp_tests"),
           why="the leaders' direct round is priced as one message where it goes slot by slot "
               "in lock step, so auto takes it past the slot where the flat ring is cheaper"),
    Mutant("model_direct_round_priced_as_one_slice", "torch_ring_backend/bench/model.py",
           "        return loops * _step(piece * (hosts - 1), inter, sharing=sharing)",
           "        return _step(shard * (hosts - 1), inter, sharing=sharing)", "py",
           "tests/python/test_scale_model.py -x -q", timeout=120, why="the same in the model"),
    Mutant("emulated_port_rate_ignored", "tests/python/link_emulator.py",
           "                if rate > 0:", "                if False:", "py",
           "tests/python/test_link_emulator.py -x -q", timeout=120,
           why="the emulated switch forwards at any rate, so the rate-limited bench measures the "
               "relay, not a link (its tests need root and /dev/net/tun, else they skip and the "
               "mutant survives)"),
    Mutant("emulated_destination_port_not_shared", "tests/python/link_emulator.py",
           "inbound_free[out] = max(outbound_free[fd], inbound_free[out]) + wire",
           "inbound_free[out] = outbound_free[fd] + wire", "py",
           "tests/python/test_link_emulator.py -q", timeout=120,
           why="two hosts sending to one each get the whole of its port (root, as above)"),
]
