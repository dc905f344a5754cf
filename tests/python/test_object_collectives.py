"""Object collectives (pickled objects moved as uint8/int64 tensors over the ring group), from
every root, with objects whose pickled sizes differ by rank."""
import pytest
import torch.distributed as dist

from harness import WORLDS


def object_of(rank, salt=0):
    """A plain object whose pickled size differs by rank (up to ~100 kB)."""
    return {"rank": rank, "salt": salt, "text": "ring" * (rank * 997 + salt + 1),
            "nested": [rank, (salt, str(rank)), {"bytes": bytes(range(rank + 3))}],
            "big": b"\x01" * (25_000 * rank)}


def object_collectives(ctx):
    w, me = ctx.world, ctx.rank
    results = {}
    gathered = [None] * w
    dist.all_gather_object(gathered, object_of(me))
    results["all_gather_object"] = gathered
    for root in range(w):
        objects = [object_of(root, 1), "second"] if me == root else [None, None]
        dist.broadcast_object_list(objects, src=root)
        results[f"broadcast_object_list root {root}"] = objects
        out = [None] * w if me == root else None
        dist.gather_object(object_of(me, 2), out, dst=root)
        results[f"gather_object root {root}"] = out
        received = [None]
        inputs = [object_of(root, 10 + dst) for dst in range(w)] if me == root else None
        dist.scatter_object_list(received, inputs, src=root)
        results[f"scatter_object_list root {root}"] = received
    return results


def expected_results(world, rank):
    want = {"all_gather_object": [object_of(r) for r in range(world)]}
    for root in range(world):
        want[f"broadcast_object_list root {root}"] = [object_of(root, 1), "second"]
        want[f"gather_object root {root}"] = (
            [object_of(r, 2) for r in range(world)] if rank == root else None)
        want[f"scatter_object_list root {root}"] = [object_of(root, 10 + rank)]
    return want


@pytest.mark.parametrize("world", WORLDS)
def test_object_collectives(pool, world):
    for rank, got in enumerate(pool.run(object_collectives)):
        want = expected_results(world, rank)
        wrong = [key for key in want if got.get(key) != want[key]]
        assert not wrong, f"rank {rank}: wrong results for {wrong}"
