"""Reads the flight-recorder dumps of every rank of a job (torch's format: what
torch_ring_backend.dump_flight_recorder writes, one file per rank) and says where the ranks
parted: per group, the first collective that did not complete on every rank, which ranks never
issued it, and which issued another collective or other sizes in its place. With --png, a
picture of the job (trace_png.py).

    python -m torch_ring_backend.trace DIR [--prefix nccl_trace_rank_] [--png job.png]

It works on any torch; torch 2.15's `python -m torch.distributed.flight_recorder.fr_trace DIR`
reads the same files. Exits 0 if every collective in the dumps completed on every member of
its group, 1 if not."""
import argparse
import ast
import os
import pickle
import re
import sys
from collections import defaultdict

_RANK_AT_END = re.compile(r"^(.*?)(\d+)$")


def load(directory, prefix=None):
    """{global rank: dump} of the files in `directory` named <prefix><rank> (the prefix is
    inferred when every such file shares one)."""
    found = defaultdict(dict)
    for name in sorted(os.listdir(directory)):
        m = _RANK_AT_END.match(name)
        if m and (prefix is None or m.group(1) == prefix):
            found[m.group(1)][int(m.group(2))] = os.path.join(directory, name)
    if not found:
        raise SystemExit(f"trace: no dump files (<prefix><rank>) in {directory}")
    if len(found) > 1:
        raise SystemExit(f"trace: several prefixes in {directory} ({sorted(found)}): pass --prefix")
    dumps = {}
    for rank, path in next(iter(found.values())).items():
        with open(path, "rb") as f:
            dumps[rank] = pickle.load(f)
    return dumps


def _call(e):
    return f"{e['profiling_name'].split(':', 1)[-1]} #{e['collective_seq_id']}"


def findings(dumps):
    """One line per problem found, in group order; empty when everything completed."""
    groups = {}  # uid -> (desc, member global ranks)
    by_group = defaultdict(lambda: defaultdict(dict))  # uid -> rank -> seq -> entry
    for rank, d in dumps.items():
        for uid, cfg in d["pg_config"].items():
            groups[uid] = (cfg["desc"], ast.literal_eval(cfg["ranks"]))
        for e in d["entries"]:
            uid = e["process_group"][0]
            by_group[uid][rank][e["collective_seq_id"]] = e
    out = []
    for uid, (desc, members) in sorted(groups.items()):
        per_rank = by_group[uid]
        missing_dumps = [r for r in members if r not in dumps]
        if missing_dumps:
            out.append(f"group {uid} ({desc}): no dump from ranks {missing_dumps}")
        seqs = sorted({s for r in per_rank for s in per_rank[r]})
        for s in seqs:
            have = {r: per_rank[r][s] for r in members if s in per_rank.get(r, {})}
            # A rank whose dump has a later collective but not this one has dropped it from its
            # recorder (only the last entries are kept): it is not a finding.
            never = [r for r in members if r in dumps and r not in have and
                     not any(t > s for t in per_rank.get(r, {}))]
            if all(e["state"] == "completed" for e in have.values()) and not never:
                continue
            first = next(iter(have.values()))
            names = {r: (e["profiling_name"], e["input_sizes"], e["input_dtypes"]) for r, e in have.items()}
            reference = names[min(names)]
            text = (f"group {uid} ({desc}): {_call(first)} did not complete on every rank: " +
                    ", ".join(f"rank {r} {e['state']}" for r, e in sorted(have.items())))
            if never:
                text += f"; ranks {never} never issued it (their last: " + ", ".join(
                    f"rank {r} " + (_call(per_rank[r][max(per_rank[r])]) if per_rank.get(r) else "none")
                    for r in never) + ")"
            differ = [r for r, n in names.items() if n != reference]
            if differ:
                text += "; ranks " + str(sorted(differ)) + " called it differently: " + ", ".join(
                    f"rank {r} {names[r][0]} {names[r][1]} {names[r][2]}" for r in sorted(names))
            out.append(text)
            break  # the first divergence per group; what follows it is its consequence
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m torch_ring_backend.trace",
                                description=__doc__.splitlines()[0])
    p.add_argument("directory")
    p.add_argument("--prefix", default=None, help="file name before the rank (default: inferred)")
    p.add_argument("--png", default=None,
                   help="also draw the job: ranks by time, collectives as bars, waits shaded")
    a = p.parse_args(argv)
    dumps = load(a.directory, a.prefix)
    if a.png:
        from .trace_png import render

        with open(a.png, "wb") as f:
            f.write(render(dumps))
        print(f"trace: picture in {a.png}")
    problems = findings(dumps)
    print(f"trace: {len(dumps)} ranks' dumps, "
          f"{sum(len(d['entries']) for d in dumps.values())} entries")
    for line in problems:
        print(line)
    if not problems:
        print("every collective in the dumps completed on every rank of its group")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
