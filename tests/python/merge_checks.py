"""Rank functions of test_merge_remote_group.py (module level: spawned ranks import them by
name). ProcessGroup.merge_remote_group on "ring" and on gloo, the same ranks, the same steps."""
import datetime

import torch
import torch.distributed as dist


def rank_merge_two_halves(backend):
    """Four ranks in two groups of two ({0, 1} and {2, 3}); each group merges into one group of
    four through a store every rank shares. torch numbers the merged ranks in the order they
    reach the store (ProcessGroup::mergeRemoteGroup's add on "mergeGroupRank"), so the checks
    hold for any order: sizes, distinct ranks, an all_reduce's closed form and an all_gather
    that puts each rank's global rank at its merged rank."""
    import torch_ring_backend  # noqa: F401

    dist.init_process_group("gloo")  # the store; the groups under test are made below
    me = dist.get_rank()
    halves = [dist.new_group([0, 1], backend=backend), dist.new_group([2, 3], backend=backend)]
    half = halves[me // 2]
    store = dist.PrefixStore(f"merge/{backend}", dist.distributed_c10d._get_default_store())
    merged = half.merge_remote_group(store, 4, datetime.timedelta(seconds=60),
                                     f"{backend}-merged")
    summed = torch.tensor([float(me + 1)])
    merged.allreduce([summed]).wait()
    gathered = [torch.empty(1, dtype=torch.int64) for _ in range(4)]
    merged.allgather([gathered], [torch.tensor([me])]).wait()
    # The half still works on its own after the merge.
    own = torch.tensor([1.0])
    half.allreduce([own]).wait()
    result = {"size": merged.size(), "rank": merged.rank(), "sum": summed.item(),
              "gathered": [int(t.item()) for t in gathered], "half_sum": own.item(),
              "backend": merged._get_backend(torch.device("cpu")).name()}
    dist.destroy_process_group()
    return result
