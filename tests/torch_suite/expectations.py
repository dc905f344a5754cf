"""What PyTorch's distributed suite is expected to do on "ring", and why: every entry has its
reason. run_suite.py fails on any other outcome (a new failure, or an expected failure that
now passes: then the entry goes)."""

_ONLY_GLOO = "gated on BACKEND == 'gloo'"

# Tests gated on the backend's NAME (gloo, MPI) that exercise only what "ring" supports on the
# CPU: their gate is lifted (ring_suite.py) and they run. name -> why ring qualifies.
LIFTED = {
    **{f"test_all_reduce_coalesced_{form}{op}": f"{_ONLY_GLOO}; ring implements all_reduce_coalesced"
       for form in ("", "group_", "full_group_") for op in ("max", "min", "product", "sum")},
    "test_scatter_object_list": f"{_ONLY_GLOO}; object collectives run on ring's scatter",
    "test_grads_same_across_ranks_with_no_sync": f"{_ONLY_GLOO}; DDP no_sync on CPU",
    "test_get_future": "gated on mpi/nccl/gloo; ring's Works have futures (DDP reads them)",
    **{name: f"{_ONLY_GLOO}; ring's barrier honours its timeout"
       for name in ("test_barrier_timeout_global", "test_barrier_timeout_group",
                    "test_barrier_timeout_full_group")},
    "test_batch_isend_irecv_gloo": f"{_ONLY_GLOO}; ring runs batch_isend_irecv on CPU",
    "test_batch_isend_irecv_gloo_tags": f"{_ONLY_GLOO}; ring matches receives by tag",
    **{name: "gated on MPI for CPU tensors; ring runs all_to_all on CPU"
       for name in ("test_all_to_all", "test_all_to_all_full_group", "test_all_to_all_group",
                    "test_all_to_all_complex",
                    "test_all_to_all_single_equal_split", "test_all_to_all_single_unequal_split",
                    "test_all_to_all_single_equal_split_group",
                    "test_all_to_all_single_unequal_split_group",
                    "test_all_to_all_single_equal_split_full_group",
                    "test_all_to_all_single_unequal_split_full_group",
                    "test_all_to_all_single_equal_split_complex",
                    "test_all_to_all_single_unequal_split_complex")},
    **{name: "gated on nccl/gloo for DDP; ring runs DDP on CPU"
       for name in ("test_static_graph_multi_forward", "test_sync_bn_logged")},
}

# Tests that run and fail on "ring", by a limit of torch, not of this backend. name -> reason.
EXPECTED_FAILURES = {
    "test_ddp_logging_data_cpu": (
        "DDP's logger records ProcessGroup::getBackendName(), which torch returns as 'custom' for "
        "every third-party backend (ProcessGroup.hpp: backendTypeToString(CUSTOM)); the test "
        "compares it with dist.get_backend() == 'ring'"),
}

# The tests that torch skips below WORLD_SIZE 8 (skip_if_small_worldsize), run at world 8 by
# `run_suite.py --world 8` (part of the CI run): subgroups of a larger group.
WORLD_8 = [
    "test_all_gather_coalesced_group", "test_all_gather_group",
    "test_all_reduce_coalesced_group_max", "test_all_reduce_coalesced_group_min",
    "test_all_reduce_coalesced_group_product", "test_all_reduce_coalesced_group_sum",
    "test_all_reduce_group_max", "test_all_reduce_group_min", "test_all_reduce_group_product",
    "test_all_reduce_group_sum", "test_all_to_all_group",
    "test_all_to_all_single_equal_split_group", "test_all_to_all_single_unequal_split_group",
    "test_barrier_group", "test_barrier_timeout_group", "test_broadcast_group",
    "test_gather_group", "test_reduce_group_max", "test_reduce_group_min",
    "test_reduce_group_product", "test_reduce_group_sum", "test_scatter_group",
]
