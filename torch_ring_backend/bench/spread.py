"""Run-to-run spread of torch-ring-bench: ring's time at every (collective, size) across the
--json files of several runs of the same sweep, and the slowest run over the fastest.

    for i in 1 2 3 4 5; do
        OMP_NUM_THREADS=1 python -m torch_ring_backend.bench --nproc 2 --reference none \\
            --collectives all_reduce,broadcast -b 8 -e 64M --json run$i.json
    done
    python -m torch_ring_backend.bench.spread run*.json --limit 1.5

Why a tool of its own: one run's table cannot show whether its numbers would come back, and
on a shared machine they often do not (docs/notes/benchmarks_cpu.md). The question "is the slowest
of N runs within X of the fastest at every size" needs every run's rows side by side.

Exit codes: 0 every size within --limit, 1 some size over it (listed), 2 files that cannot be
compared (unreadable, not torch-ring-bench rows, or not the same sweep: world size, dtype,
collectives and sizes must all agree).
"""
import argparse
import json
import sys


class NotComparable(Exception):
    pass


def _load(path):
    try:
        with open(path) as f:
            data = json.load(f)
        meta, rows = data["meta"], data["rows"]
        times = {(r["collective"], r["bytes"]): float(r["time_us"]) for r in rows}
        shape = (meta["world_size"], rows[0]["dtype"] if rows else None)
        if not times or min(times.values()) <= 0:
            raise ValueError("no rows, or a time that is not positive")
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        raise NotComparable(f"{path}: not a torch-ring-bench --json file ({type(e).__name__}: {e})")
    return shape, times


def spread(paths):
    """{(collective, bytes): [time_us per run]}, in the first run's row order."""
    if len(paths) < 2:
        raise NotComparable(f"needs the files of at least 2 runs, got {len(paths)}")
    first_shape, first = _load(paths[0])
    table = {key: [t] for key, t in first.items()}
    for path in paths[1:]:
        shape, times = _load(path)
        if shape != first_shape:
            raise NotComparable(f"{path}: world size, dtype {shape} differ from {paths[0]}'s "
                                f"{first_shape}")
        if set(times) != set(first):
            odd = sorted(set(times) ^ set(first))[:4]
            raise NotComparable(f"{path}: not the same collectives and sizes as {paths[0]} "
                                f"(e.g. {odd})")
        for key, t in times.items():
            table[key].append(t)
    return table


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m torch_ring_backend.bench.spread",
                                description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", help="--json files of runs of the same sweep")
    p.add_argument("--limit", type=float, default=1.5,
                   help="largest slowest/fastest ratio that counts as stable (default 1.5)")
    a = p.parse_args(argv)
    try:
        table = spread(a.files)
    except NotComparable as e:
        print(f"spread: {e}", file=sys.stderr)
        return 2
    over = []
    collective = None
    for (c, size), times in table.items():
        if c != collective:
            collective = c
            print(f"# {c}: time(us) in each of {len(times)} runs, slowest/fastest")
        ratio = max(times) / min(times)
        flag = "  over" if ratio > a.limit else ""
        print(f"{size:>12} " + " ".join(f"{t:10.1f}" for t in times) + f" {ratio:7.2f}{flag}")
        if ratio > a.limit:
            over.append((ratio, c, size))
    worst = max((max(t) / min(t), c, s) for (c, s), t in table.items())
    print(f"# {len(table) - len(over)} of {len(table)} sizes within {a.limit}x; worst "
          f"{worst[0]:.2f}x ({worst[1]} {worst[2]} B)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
