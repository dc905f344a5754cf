#!/usr/bin/env python3
"""The layering rule of csrc/, checked: a file may include headers of its own layer and of the
layers below it, never of a layer above. From the bottom:

    common < protocol < reduce < schedule < kernels < transport < executor < backend

common: errors, logging, env knobs; protocol: the message header every path checks; reduce:
element-wise functors (host and device); schedule: partition and ring plans (pure functions);
kernels: the CUDA ring kernels and their launcher; transport: links to peers (shm, tcp, CUDA
IPC); executor: runs plans over links (the CPU executor, the communicator); backend: torch's
c10d::Backend (the only layer with torch headers).

Exits 1 and lists every include that points up (or into an unknown folder)."""
import pathlib
import re
import sys

LAYERS = ["common", "protocol", "reduce", "schedule", "kernels", "transport", "executor", "backend"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def main(root):
    csrc = pathlib.Path(root) / "csrc"
    problems = []
    checked = 0
    for path in sorted(csrc.rglob("*")):
        if path.suffix not in (".h", ".cc", ".cu", ".cuh"):
            continue
        layer = path.relative_to(csrc).parts[0]
        if layer not in LAYERS:
            problems.append(f"{path}: folder '{layer}' is not a known layer")
            continue
        for target in INCLUDE.findall(path.read_text()):
            top = target.split("/")[0]
            if top not in LAYERS:
                continue  # a header of the same folder written without its layer, or a system one
            checked += 1
            if LAYERS.index(top) > LAYERS.index(layer):
                problems.append(f"{path.relative_to(root)}: includes {target} "
                                f"({top} is above {layer})")
    for p in problems:
        print(p)
    print(f"check_layers: {checked} includes checked, {len(problems)} pointing up")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(__file__).resolve().parent.parent))
