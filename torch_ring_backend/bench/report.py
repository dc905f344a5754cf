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
from .machine import describe, machine_kind
from .measure import ROOFLINE_BYTES, ROOFLINE_REPEATS, Measurement
from .options import PROG, MiB, _human

# ---- rows and the run's metadata ---------------------------------------------------------------

def _row(name, cfg, world, nbytes, count, timed, warmup, ring, refs, copy_gbps):
    """One collective at one size. `refs`: {reference name: Measurement}; a reference missing
    there (measured later, as mpi is) gets empty columns until add_reference fills them."""
    spec = COLLECTIVES[name]
    algbw = nbytes / ring.seconds / 1e9
    busbw = algbw * spec.busbw_factor(world)
    row = {
        "collective": name, "bytes": nbytes, "count": count, "dtype": cfg.dtype,
        "op": cfg.op if spec.reduces else None,
        "inplace": is_inplace(spec, cfg),
        "world_size": world, "device": cfg.device, "iters": timed, "warmup": warmup,
        "time_us": ring.seconds * 1e6, "algbw_gbps": algbw, "busbw_gbps": busbw,
        "roofline_fraction": busbw / copy_gbps if copy_gbps else None, "wrong": ring.wrong,
        "reference": cfg.reference if cfg.reference != "none" else None,
        "references": {},
    }
    for ref in cfg.references:
        _set_reference(row, ref, refs.get(ref, Measurement()), cfg)
    return row


def _set_reference(row, ref, m, cfg):
    """The columns of reference `ref` in `row`; the first reference's also as the flat ref_*
    fields (the layout of runs with one reference)."""
    factor = COLLECTIVES[row["collective"]].busbw_factor(row["world_size"])
    algbw = row["bytes"] / m.seconds / 1e9 if m.seconds is not None else None
    fields = {
        "time_us": m.seconds * 1e6 if m.seconds is not None else None,
        "algbw_gbps": algbw, "busbw_gbps": algbw * factor if algbw is not None else None,
        "wrong": m.wrong, "refused": m.error,
        "ratio": m.seconds * 1e6 / row["time_us"] if m.seconds is not None else None,
    }
    row["references"][ref] = fields
    if ref == cfg.reference:
        row.update(ref_time_us=fields["time_us"], ref_algbw_gbps=fields["algbw_gbps"],
                   ref_busbw_gbps=fields["busbw_gbps"], ref_wrong=fields["wrong"],
                   ratio=fields["ratio"])


def add_reference(rows, ref, measured, cfg):
    """Fills reference `ref`'s columns from {collective: [Measurement per size, in row order]}."""
    for name, ms in measured.items():
        for row, m in zip([r for r in rows if r["collective"] == name], ms):
            _set_reference(row, ref, m, cfg)


def _meta(cfg, world, copy_rates):
    return {
        "world_size": world, "device": cfg.device, "dtype": cfg.dtype, "op": cfg.op,
        "inplace": cfg.inplace, "reference": cfg.reference if cfg.reference != "none" else None,
        "references": list(cfg.references),
        "launched_by": "torchrun" if _launched_by_torchrun() else "torch-ring-bench",
        "load_processes": cfg.load,
        # the roofline: the faster of the two ways one process copies (see measure_copy_bandwidth)
        "copy_gbps": max(copy_rates.values()) / 1e9, "copy_bytes": ROOFLINE_BYTES,
        "copy_gbps_torch": copy_rates["torch"] / 1e9,
        "copy_gbps_memcpy": copy_rates["memcpy"] / 1e9 if "memcpy" in copy_rates else None,
        "torch": torch.__version__, "torch_ring_backend": torch_ring_backend.__version__,
        "host": platform.node(), "cpu": _cpu_model(), "cores": os.cpu_count(),
        "machine": machine_kind(),
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

    def __init__(self, cfg, meta, enabled, rows_shown=True):
        # enabled: this process shows anything (rank 0); rows_shown: the table too, not only
        # the progress line (off while the MPI reference is still to come).
        self.cfg, self.meta, self.enabled = cfg, meta, enabled and rows_shown
        self.progress_enabled = enabled
        self.refs = cfg.references
        self.tty = sys.stderr.isatty()
        self.started = self.last_progress = time.monotonic()
        self.progress_shown = False
        if self.enabled:
            self._print_preamble()

    def _print_preamble(self):
        m = self.meta
        vs = f" vs {', '.join(self.refs)}" if self.refs else ""
        self._out(f"# {PROG}: ring{vs}, world {m['world_size']}, device {m['device']}, "
                  f"torch {m['torch']}, torch_ring_backend {m['torch_ring_backend']}")
        if m["load_processes"]:
            self._out(f"# under load: {m['load_processes']} busy processes share the cores "
                      "for the whole sweep (--load)")
        ways = f"copy_ {m['copy_gbps_torch']:.2f}"
        if m["copy_gbps_memcpy"] is not None:
            ways += f", memcpy {m['copy_gbps_memcpy']:.2f}"
        self._out(f"# machine: {describe(m['machine'])}")
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
        for ref in self.refs:
            if ref == "fake":  # torch's own cost per call, and what ring adds to it
                head += f" | {'fake(us)':>9} {'ring-fake':>9}"
            else:
                head += (f" | {ref + '(us)':>10} {ref + ' busbw':>11} {'#wrong':>6} "
                         f"{'ring/' + ref:>9}")
        self._out(head)

    def add(self, row):
        if not self.enabled:
            return
        roof = None if row["roofline_fraction"] is None else 100 * row["roofline_fraction"]
        line = (f"{row['bytes']:>12} {row['count']:>11} {row['dtype']:>8} {row['op'] or 'none':>7} "
                f"{_fmt(row['time_us'], '.1f', 10)} {_fmt(row['algbw_gbps'], '.3f', 11)} "
                f"{_fmt(row['busbw_gbps'], '.3f', 11)} {_fmt(roof, '.1f', 6)} {row['wrong']:>6}")
        for ref in self.refs:
            r = row["references"][ref]
            if ref == "fake":
                own = None if r["time_us"] is None else row["time_us"] - r["time_us"]
                line += f" | {_fmt(r['time_us'], '.1f', 9)} {_fmt(own, '.1f', 9)}"
                continue
            ratio = None if r["ratio"] is None else f"{r['ratio']:.2f}x"
            line += (f" | {_fmt(r['time_us'], '.1f', 10)} {_fmt(r['busbw_gbps'], '.3f', 11)} "
                     f"{_fmt(r['wrong'], 'd', 6)} {_fmt(ratio, 's', 9)}")
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
            for ref in self.refs:
                theirs = [r["references"][ref]["busbw_gbps"] for r in mine]
                if ref != "fake" and any(b is not None for b in theirs):
                    summary += f", {ref} {_avg_of(theirs):.3f} GB/s"
                refused = next((r["references"][ref]["refused"] for r in mine
                                if r["references"][ref]["refused"]), None)
                if refused:
                    summary += f" ({ref} refused: {refused})"
            wrong = sum(r["wrong"] for r in mine)
            summary += f"; #wrong {wrong} {'OK' if wrong == 0 else 'FAILED'}"
            self._out(summary)

    def progress(self, text):
        if not self.progress_enabled:
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
    return _avg_of([r[key] for r in rows])


def _avg_of(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else 0.0


def print_table(cfg, meta, rows):
    """The whole table at once, from finished rows (when a reference was measured after the
    ranks: mpi)."""
    table = Table(cfg, meta, enabled=True)
    for name in cfg.collectives:
        table.begin(name, COLLECTIVES[name])
        for row in rows:
            if row["collective"] == name:
                table.add(row)
    table.finish(rows)


# ---- files -------------------------------------------------------------------------------------

def write_outputs(cfg, meta, rows):
    if cfg.json_path:
        with open(cfg.json_path, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
        print(f"[{PROG}] wrote {cfg.json_path}", file=sys.stderr)
    if cfg.csv_path:
        flat = [_flat_row(r) for r in rows]
        with open(cfg.csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(flat[0]) if flat else ["collective"])
            writer.writeheader()
            writer.writerows(flat)
        print(f"[{PROG}] wrote {cfg.csv_path}", file=sys.stderr)
    if cfg.plot_path:
        plot_busbw(cfg.plot_path, meta, rows)
        print(f"[{PROG}] wrote {cfg.plot_path}", file=sys.stderr)


def _flat_row(row):
    """A row for CSV: each reference's columns as "<reference>_<field>"."""
    flat = {k: v for k, v in row.items() if k != "references"}
    for ref, fields in row["references"].items():
        flat.update({f"{ref}_{k}": v for k, v in fields.items()})
    return flat


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
        for j, ref in enumerate(r for r in meta["references"] if r != "fake"):
            points = [dict(bytes=r["bytes"], busbw=r["references"][ref]["busbw_gbps"]) for r in mine]
            _plot_line(ax, points, "busbw", ("--s", ":^", "-.v")[j % 3], f"C{i}", f"{name} {ref}")
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
