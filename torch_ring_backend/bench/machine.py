"""Which kind of machine a benchmark ran on, for every table and floor: the CPU's model, whether
it has AVX-512, and whether the CPUs this process may use share one last-level cache (from the
kernel's sysfs tree, as the backend's set-up reads it: csrc/common/cache_topology.h). The
project's machines come in kinds whose copies between cores differ by 2x (cores that share an L3
against cores that do not), so a figure without its kind cannot be compared."""
import os

CPU_TREE = "/sys/devices/system/cpu"


def _first_line(path):
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return None


def last_level_cache(cpu, tree=CPU_TREE):
    """(level, shared_cpu_list) of `cpu`'s highest-level data cache, or None."""
    best = None
    index = 0
    while True:
        d = f"{tree}/cpu{cpu}/cache/index{index}"
        level = _first_line(f"{d}/level")
        if level is None:
            break
        index += 1
        kind = _first_line(f"{d}/type")
        if kind in (None, "Instruction"):
            continue
        shared = _first_line(f"{d}/shared_cpu_list")
        if shared and (best is None or int(level) > best[0]):
            best = (int(level), shared)
    return best


def cache_sharing(cpus=None, tree=CPU_TREE):
    """'one L3 (0-1)' when every CPU in `cpus` (default: this process's) uses the same
    last-level cache, 'N L3s (0, 1)' when they do not, 'unknown' when the tree is unreadable."""
    cpus = sorted(os.sched_getaffinity(0)) if cpus is None else cpus
    caches = [last_level_cache(c, tree) for c in cpus]
    if not caches or any(c is None for c in caches):
        return "unknown"
    distinct = sorted(set(caches))
    levels = "/".join(sorted({f"L{lvl}" for lvl, _ in distinct}))
    if len(distinct) == 1:
        return f"one {levels} ({distinct[0][1]})"
    return f"{len(distinct)} {levels}s ({', '.join(s for _, s in distinct)})"


def _cpuinfo():
    model, flags = None, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if model is None and line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                elif not flags and line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                if model is not None and flags:
                    break
    except OSError:
        pass
    return model or "unknown CPU", flags


def machine_kind():
    """A dict for JSON and the one line every table prints (`describe`)."""
    model, flags = _cpuinfo()
    cpus = sorted(os.sched_getaffinity(0))
    sharing = cache_sharing(cpus)
    return {"cpu": model, "avx512": "avx512f" in flags, "cores": len(cpus),
            "last_level_cache": sharing}


def describe(kind=None):
    k = kind or machine_kind()
    isa = "AVX-512" if k["avx512"] else "no AVX-512"
    llc = k["last_level_cache"]
    if llc.startswith("one "):
        where = f"sharing {llc}"
    elif llc == "unknown":
        where = "(cache layout unknown)"
    else:
        where = f"under {llc}: no last-level cache shared"
    return f"{k['cpu']}, {isa}, {k['cores']} cores {where}"
