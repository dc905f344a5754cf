"""The .cc files of csrc/ that one all_reduce runs code of, counted rather than read: the walk of
docs/architecture.md ("Following one all_reduce"), as the machine took it.

    python scripts/call_walk.py                      # 4 KiB of float32, world 2
    python scripts/call_walk.py --numel 4194304      # 16 MiB (the worker's flat ring)

Runs `pg.allreduce([t]).wait()` under callgrind exactly as scripts/call_instructions.py does
(rank 0 counted, its peer native beside it and spinning through its waits as natively, every
thread of rank 0's process counted), then
names the source file of each function of the extension that executed, from the build's object
files (no debug information needed): a function a .cc defines as its own (`nm` type T or t)
belongs to that .cc. A weak symbol (W: an inline function or a template, emitted wherever it is
used) of this project (ring::) defined in exactly one object is listed under that .cc too,
marked "(w)": it is either a template of that .cc or an inline function of a header that only
it uses, so read it before counting the file. Weak symbols emitted by several objects are
headers' inline functions, and library templates (std::, c10::) belong to no file of ours:
both are left out, as are functions outside the extension (torch, libc).

Needs valgrind and a build tree with the object files (scripts/dev_build.sh: build/dev).
Prints per file the instructions per call, on how many of the counted calls it was entered
(from callgrind's call counts), and its functions; "entered" counts the files. Last, whether
the walk went back into a file it had left: files that call each other, directly or through
library code between them (a cycle of the graph of which file calls which).
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import call_instructions  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def without_templates(name):
    """`name` with every <...> and the "(anonymous namespace)::" qualifiers removed."""
    name = name.replace("(anonymous namespace)::", "")
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def is_ours(name):
    """Whether a function is this project's (ring::...), not a library template instantiated
    for our types (std::vector<ring::Step>::reserve)."""
    return re.match(r"^(\S+ )?ring::", without_templates(name)) is not None


def symbol_files(build):
    """{demangled name: (kind, [source .cc, ...])} over the extension's object files."""
    where = defaultdict(list)
    kinds = {}
    objects = glob.glob(os.path.join(build, "CMakeFiles", "*", "csrc", "**", "*.o"),
                        recursive=True)
    if not objects:
        raise SystemExit(f"call_walk: no object files under {build}/CMakeFiles (build it first)")
    for obj in objects:
        if not any(f"{os.sep}{t}.dir{os.sep}" in obj for t in ("_C", "ring_core")):
            continue
        source = "csrc" + obj.split(f"{os.sep}csrc", 1)[1][: -len(".o")]
        if not os.path.exists(os.path.join(REPO, source)):
            continue  # a stale object of a file since removed
        out = subprocess.run(["nm", "-C", "--defined-only", obj], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) != 3 or parts[1] not in ("T", "t", "W"):
                continue
            name = parts[2]
            if parts[1] == "W":
                kinds.setdefault(name, "W")
            else:
                kinds[name] = "T"
            if source not in where[name]:
                where[name].append(source)
    return {name: (kinds[name], files) for name, files in where.items()}


def executed_functions(callgrind_file, library):
    """[(instructions, demangled name)] of the functions of `library` that ran."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100",
                          callgrind_file], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        line = line.strip()
        if not line or not line[0].isdigit() or library not in line.rsplit(" [", 1)[-1]:
            continue
        ir, rest = line.split(" ", 1)
        rest = rest.split(")  ", 1)[1] if ")  " in rest else rest.strip()
        name = rest.split(":", 1)[1] if rest.startswith("???:") or ".cc:" in rest else rest
        name = name.rsplit(" [", 1)[0]
        found.append((int(ir.replace(",", "")), name))
    return found


def call_records(callgrind_file):
    """[(caller, callee, times)] from callgrind's call records (demangled names)."""
    names, records, caller, callee = {}, [], None, None

    def named(ref):
        ident, _, name = ref.strip().partition(" ")
        if name:
            names[ident] = name
        return names.get(ident, ident)

    with open(callgrind_file) as f:
        for line in f:
            if line.startswith("fn="):
                caller = named(line[3:])
            elif line.startswith("cfn="):
                callee = named(line[4:])
            elif line.startswith("calls=") and callee is not None:
                records.append((caller, callee, int(line[6:].split()[0])))
                callee = None
    return records


def file_edges(records, file_of):
    """{(from file, to file)}: a function of one .cc calls one of another, directly or through
    functions that belong to no file of ours (a std::function's invoker, torch's dispatcher)."""
    callees = defaultdict(set)
    for caller, callee, _ in records:
        callees[caller].add(callee)
    edges = set()
    for start in list(callees):
        origin = file_of(start)
        if origin is None:
            continue
        seen, todo = {start}, list(callees[start])
        while todo:
            fn = todo.pop()
            if fn in seen:
                continue
            seen.add(fn)
            target = file_of(fn)
            if target is None:
                todo.extend(callees.get(fn, ()))
            elif target != origin:
                edges.add((origin, target))
    return edges


def entered_again(edges):
    """The groups of files that call each other (a cycle of the file graph), each sorted: a walk
    that enters a file it has left, from below."""
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    def reach(a):
        seen, todo = set(), [a]
        while todo:
            for b in graph[todo.pop()]:
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen
    reachable = {a: reach(a) for a in list(graph)}
    groups = set()
    for a in reachable:
        group = tuple(sorted(b for b in reachable[a] if a in reachable.get(b, ())))
        if len(group) > 1:
            groups.add(group)
    return sorted(groups)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--numel", type=int, default=1024, help="float32 elements (1024: 4 KiB)")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--calls", type=int, default=0, help="counted calls (default: by size)")
    p.add_argument("--build", default="build/dev", help="the build tree of the loaded _C")
    p.add_argument("--keep", metavar="DIR", help="keep the callgrind file in DIR")
    a = p.parse_args(argv)
    big = a.numel * 4 >= (1 << 20)
    calls = a.calls or (10 if big else 500)
    warmup = 3 if big else 300
    symbols = symbol_files(a.build)
    with tempfile.TemporaryDirectory() as scratch:
        workdir = a.keep or scratch
        os.makedirs(workdir, exist_ok=True)
        per_call = call_instructions.count("ring", calls, workdir, a.world, a.numel, warmup)
        files = [f for f in glob.glob(os.path.join(workdir, "ring.callgrind*"))
                 if os.path.getsize(f) > 0]
        ran = executed_functions(files[0], "_C.cpython") if files else []
        records = call_records(files[0]) if files else []
    def file_of(name):
        kind, sources = symbols.get(name, ("", []))
        if not sources or not is_ours(name) or (kind == "W" and len(sources) > 1):
            return None
        return sources[0]

    # How many times each file was entered: calls into it from a function of another file.
    entries = defaultdict(int)
    for caller, callee, times in records:
        target = file_of(callee)
        if target is not None and file_of(caller) != target:
            entries[target] += times
    by_file = defaultdict(lambda: [0, []])  # instructions, functions
    for ir, name in ran:
        if name not in symbols:
            continue
        kind, sources = symbols[name]
        if not is_ours(name) or (kind == "W" and len(sources) > 1):
            continue
        entry = by_file[sources[0]]
        entry[0] += ir
        entry[1].append(("(w) " if kind == "W" else "") + without_templates(name).split("(", 1)[0])
    print(f"all_reduce of {a.numel} float32 ({a.numel * 4} bytes), world {a.world}: "
          f"{per_call:.0f} instructions per call in all, {calls} calls counted")
    every = 0
    for source, (ir, names) in sorted(by_file.items(), key=lambda kv: kv[0]):
        # Entered fewer times than there were calls: on some calls only (a batch, a wake-up).
        some = entries[source] < calls
        every += not some
        when = f"{entries[source]} times in {calls} calls" if some else "every call"
        print(f"{source:44s} {ir / calls:9.0f}  {when:22s} {', '.join(sorted(set(names)))}")
    print(f"entered: {len(by_file)} .cc files, {every} of them on every call")
    again = entered_again(file_edges(records, file_of))
    for group in again:
        print("entered again from a file it called: " + " <-> ".join(group))
    if not again:
        print("no file entered again from a file it called (the file graph has no cycle)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
