"""What the GPU check relies on, probed in seconds: torch, CUDA and NCCL versions, the device, and
shared memory between two processes through torch.multiprocessing (CUDA IPC on a GPU).

    python scripts/gpu_probe.py [--device cuda|cpu] [--wait SECONDS]

Why a file and not a here-document: the child is started with the spawn method, which runs the
parent's __main__ again from its file; from `python - <<EOF` that file is "<stdin>", the child
dies at start and the parent would wait out its whole timeout. `--device cpu` runs the same
exchange with a CPU tensor (shared memory instead of cudaIpcGetMemHandle), so the mechanics are
tested on machines without a GPU (tests/python/test_gpu_check.py).

Prints one line per fact; the IPC line is "cuda ipc between processes: works" (or "FAILED: why");
exits 0 unless the IPC exchange failed on a device that exists.
"""
import argparse
import queue
import sys
import time

import torch
import torch.multiprocessing as mp

FILL = 7.0


def child(tensor, answers):
    """Writes into memory the parent allocated and says when the write is done."""
    try:
        tensor.fill_(FILL)
        if tensor.is_cuda:
            torch.cuda.synchronize()
        answers.put("ok")
    except Exception as e:  # noqa: BLE001 - the parent prints whatever went wrong
        answers.put(f"child failed: {type(e).__name__}: {e}")


def versions():
    print("torch", torch.__version__, "cuda", torch.version.cuda,
          "available", torch.cuda.is_available())
    print("python", sys.version.split()[0])
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        print("device", p.name, "SMs", p.multi_processor_count, "count", torch.cuda.device_count())
    try:
        print("nccl", ".".join(map(str, torch.cuda.nccl.version())))
    except Exception as e:  # noqa: BLE001
        print("nccl unavailable:", e)


def ipc_exchange(device, wait_s):
    """'works' or 'FAILED: <why>': a spawned child writes into the parent's tensor."""
    ctx = mp.get_context("spawn")
    tensor = torch.zeros(1 << 20, device=device)
    if device == "cpu":
        tensor.share_memory_()
    answers = ctx.Queue()
    proc = ctx.Process(target=child, args=(tensor, answers))
    start = time.monotonic()
    proc.start()
    try:
        answer = answers.get(timeout=wait_s)
    except queue.Empty:
        answer = f"no answer within {wait_s} s (child exit code {proc.exitcode})"
    proc.join(5)
    if proc.is_alive():
        proc.kill()
    if answer != "ok":
        return f"FAILED: {answer}"
    if device != "cpu":
        torch.cuda.synchronize()
    if not bool((tensor == FILL).all()):
        return "FAILED: the child's write is not visible to the parent"
    return f"works ({time.monotonic() - start:.1f} s)"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--wait", type=float, default=20.0,
                        help="seconds to wait for the child's answer (default 20)")
    args = parser.parse_args(argv)
    versions()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("cuda ipc between processes: not tried (no CUDA device)")
        return 0
    label = "cuda ipc" if args.device == "cuda" else "cpu shared memory"
    result = ipc_exchange(args.device, args.wait)
    print(f"{label} between processes: {result}")
    return 0 if not result.startswith("FAILED") else 1


if __name__ == "__main__":
    sys.exit(main())
