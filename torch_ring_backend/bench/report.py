"""What the benchmark shows and writes: one row (a dict) per collective and size, with its
bandwidths, roofline fraction and ratio to the reference; the run's metadata (versions, host,
copy roofline); the nccl-tests-like Table on stdout with its progress line on stderr; and
the --json, --csv and --plot files. Nothing here runs a collective."""
import csv
import datetime
import json
import os
import platform
import sys
import time

import torch

import torch_ring_backend

from .cases import COLLECTIVES, is_inplace
from .measure import ROOFLINE_BYTES, ROOFLINE_REPEATS
from .options import PROG, MiB, _human

# ---- rows and the run's metadata ---------------------------------------------------------------

def _row(name, cfg, world, nbytes, count, timed, warmup, ring, ref, copy_gbps):
    spec = COLLECTIVES[name]
    factor = spec.busbw_factor(world)

    def bandwidths(m):
        if m.seconds is None:
            return None, None
        algbw = nbytes / m.seconds / 1e9
        return algbw, algbw * factor

    algbw, busbw = bandwidths(ring)
    ref_algbw, ref_busbw = bandwidths(ref)
    return {
        "collective": name, "bytes": nbytes, "count": count, "dtype": cfg.dtype,
        "op": cfg.op if spec.reduces else None,
        "inplace": is_inplace(spec, cfg),
        "world_size": world, "device": cfg.device, "iters": timed, "warmup": warmup,
        "time_us": ring.seconds * 1e6, "algbw_gbps": algbw, "busbw_gbps": busbw,
        "roofline_fraction": busbw / copy_gbps if copy_gbps else None, "wrong": ring.wrong,
        "reference": cfg.reference if cfg.reference != "none" else None,
        "ref_time_us": ref.seconds * 1e6 if ref.seconds is not None else None,
        "ref_algbw_gbps": ref_algbw, "ref_busbw_gbps": ref_busbw, "ref_wrong": ref.wrong,
        "ratio": ref.seconds / ring.seconds if ref.seconds is not None else None,
    }


def _meta(cfg, world, copy_rates):
    return {
        "world_size": world, "device": cfg.device, "dtype": cfg.dtype, "op": cfg.op,
        "inplace": cfg.inplace, "reference": cfg.reference if cfg.reference != "none" else None,
        "launched_by": "torchrun" if _launched_by_torchrun() else "torch-ring-bench",
        # the roofline: the faster of the two ways one process copies (see measure_copy_bandwidth)
        "copy_gbps": max(copy_rates.values()) / 1e9, "copy_bytes": ROOFLINE_BYTES,
        "copy_gbps_torch": copy_rates["torch"] / 1e9,
        "copy_gbps_memcpy": copy_rates["memcpy"] / 1e9 if "memcpy" in copy_rates else None,
        "torch": torch.__version__, "torch_ring_backend": torch_ring_backend.__version__,
        "host": platform.node(), "cpu": _cpu_model(), "cores": os.cpu_count(),
        "time": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def _launched_by_torchrun():
    return "TORCHELASTIC_RUN_ID" in os.environ


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# ---- the table ---------------------------------------------------------------------------------

def _fmt(value, spec, width):
    return f"{'-' if value is None else format(value, spec):>{width}}"


class Table:
    """The nccl-tests-like table on stdout (rank 0 only), and a progress line on stderr that is
    rewritten in place on a terminal and otherwise printed every 10 s of a long sweep."""

    def __init__(self, cfg, meta, enabled):
        self.cfg, self.meta, self.enabled = cfg, meta, enabled
        self.ref = cfg.reference if cfg.reference != "none" else None
        self.tty = sys.stderr.isatty()
        self.started = self.last_progress = time.monotonic()
        self.progress_shown = False
        if enabled:
            self._print_preamble()

    def _print_preamble(self):
        m = self.meta
        vs = f" vs {self.ref}" if self.ref else ""
        self._out(f"# {PROG}: ring{vs}, world {m['world_size']}, device {m['device']}, "
                  f"torch {m['torch']}, torch_ring_backend {m['torch_ring_backend']}")
        ways = f"copy_ {m['copy_gbps_torch']:.2f}"
        if m["copy_gbps_memcpy"] is not None:
            ways += f", memcpy {m['copy_gbps_memcpy']:.2f}"
        self._out(f"# {m['cpu']}, {m['cores']} cores; "
                  f"memory-copy roofline {m['copy_gbps']:.2f} GB/s: "
                  f"one process copying {ROOFLINE_BYTES // MiB} MiB, best of {ROOFLINE_REPEATS} "
                  f"({ways} GB/s; the read+write traffic is twice that)")

    def begin(self, name, spec):
        if not self.enabled:
            return
        place = "in place" if is_inplace(spec, self.cfg) else "out of place"
        if spec.why_fixed:
            place += f" ({spec.why_fixed})"
        op = f", op {self.cfg.op}" if spec.reduces else ""
        self._out(f"#\n# {name}, {self.cfg.dtype}{op}, {place}")
        head = (f"#{'size':>11} {'count':>11} {'type':>8} {'redop':>7} {'time(us)':>10} "
                f"{'algbw(GB/s)':>11} {'busbw(GB/s)':>11} {'roof%':>6} {'#wrong':>6}")
        if self.ref:
            head += (f" | {self.ref + '(us)':>10} {self.ref + ' busbw':>11} {'#wrong':>6} "
                     f"{'ring/' + self.ref:>9}")
        self._out(head)

    def add(self, row):
        if not self.enabled:
            return
        roof = None if row["roofline_fraction"] is None else 100 * row["roofline_fraction"]
        line = (f"{row['bytes']:>12} {row['count']:>11} {row['dtype']:>8} {row['op'] or 'none':>7} "
                f"{_fmt(row['time_us'], '.1f', 10)} {_fmt(row['algbw_gbps'], '.3f', 11)} "
                f"{_fmt(row['busbw_gbps'], '.3f', 11)} {_fmt(roof, '.1f', 6)} {row['wrong']:>6}")
        if self.ref:
            ratio = None if row["ratio"] is None else f"{row['ratio']:.2f}x"
            line += (f" | {_fmt(row['ref_time_us'], '.1f', 10)} "
                     f"{_fmt(row['ref_busbw_gbps'], '.3f', 11)} "
                     f"{_fmt(row['ref_wrong'], 'd', 6)} {_fmt(ratio, 's', 9)}")
        self._out(line)

    def note(self, text):
        if self.enabled:
            self._out(f"# note: {text}")

    def finish(self, rows):
        if not self.enabled:
            return
        self._out("#")
        for name in self.cfg.collectives:
            mine = [r for r in rows if r["collective"] == name]
            summary = f"# {name}: avg busbw ring {_avg(mine, 'busbw_gbps'):.3f} GB/s"
            if self.ref and any(r["ref_busbw_gbps"] is not None for r in mine):
                summary += f", {self.ref} {_avg(mine, 'ref_busbw_gbps'):.3f} GB/s"
            wrong = sum(r["wrong"] for r in mine)
            summary += f"; #wrong {wrong} {'OK' if wrong == 0 else 'FAILED'}"
            self._out(summary)

    def progress(self, text):
        if not self.enabled:
            return
        now = time.monotonic()
        line = f"[{PROG}] {text}, {now - self.started:.0f} s"
        if self.tty:
            sys.stderr.write("\r" + line.ljust(72)[:100])
            sys.stderr.flush()
            self.progress_shown = True
        elif now - self.last_progress >= 10:
            print(line, file=sys.stderr, flush=True)
            self.last_progress = now

    def _out(self, line):
        if self.progress_shown:  # clear the progress line so the row starts on a clean line
            sys.stderr.write("\r" + " " * 100 + "\r")
            sys.stderr.flush()
            self.progress_shown = False
        print(line, flush=True)


def _avg(rows, key):
    values = [r[key] for r in rows if r[key] is not None]
    return sum(values) / len(values) if values else 0.0


# ---- files -------------------------------------------------------------------------------------

def write_outputs(cfg, meta, rows):
    if cfg.json_path:
        with open(cfg.json_path, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
        print(f"[{PROG}] wrote {cfg.json_path}", file=sys.stderr)
    if cfg.csv_path:
        with open(cfg.csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["collective"])
            writer.writeheader()
            writer.writerows(rows)
        print(f"[{PROG}] wrote {cfg.csv_path}", file=sys.stderr)
    if cfg.plot_path:
        plot_busbw(cfg.plot_path, meta, rows)
        print(f"[{PROG}] wrote {cfg.plot_path}", file=sys.stderr)


def plot_busbw(path, meta, rows):
    """busbw against size: ring solid, the reference dashed, the memory-copy roofline dotted."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never open a window
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(9, 5.5))
    names = list(dict.fromkeys(r["collective"] for r in rows))
    for i, name in enumerate(names):
        mine = [r for r in rows if r["collective"] == name]
        _plot_line(ax, mine, "busbw_gbps", "-o", f"C{i}", f"{name} ring")
        if meta["reference"]:
            _plot_line(ax, mine, "ref_busbw_gbps", "--s", f"C{i}", f"{name} {meta['reference']}")
    ax.axhline(meta["copy_gbps"], color="gray", linestyle=":",
               label=f"memory copy, one process ({meta['copy_gbps']:.1f} GB/s)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _human(int(round(x)))))
    ax.set_xlabel("message size (bytes of the full array)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"busbw, world {meta['world_size']}, {meta['device']}, {meta['dtype']}"
                 f" ({meta['cpu'] if meta['device'] == 'cpu' else 'GPU'})", fontsize=10)
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.15)
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_line(ax, rows, key, style, color, label):
    points = [(r["bytes"], r[key]) for r in rows if r[key]]  # log scale: no zeros (world 1)
    if points:
        ax.plot(*zip(*points), style, color=color, label=label, markersize=4)
