"""Issue 6: element counts above 2^31 are handled correctly (every size and offset is 64-bit),
not truncated or refused."""
import datetime

import pytest
import torch
import torch.distributed as dist

from torch_ring_backend._launch import run_on_local_ranks

COUNT = 2**31 + 9  # int8: just over 2 GiB per rank, past every 32-bit element index


def all_reduce_past_int32():
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    x = torch.full((COUNT,), rank + 1, dtype=torch.int8)
    x[-1] = 10 * (rank + 1)  # the last element, beyond index 2^31, carries its own value
    dist.all_reduce(x)
    summary = (int(x[:-1].min()), int(x[:-1].max()), int(x[-1]), int(x[2**31 - 1]), int(x[2**31]))
    dist.destroy_process_group()
    return summary


@pytest.mark.slow
def test_all_reduce_of_more_than_2_to_the_31_elements():
    for low, high, last, before_boundary, after_boundary in run_on_local_ranks(
            all_reduce_past_int32, 2, timeout_s=600):
        assert (low, high) == (3, 3)
        assert before_boundary == after_boundary == 3
        assert last == 30
