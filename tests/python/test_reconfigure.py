"""torch 2.14's reconfigure API (dist._reconfigure, _get_reconfigure_handle,
_supports_reconfigure) on ring, with gloo's semantics: a 3-rank group loses a rank (it exits
without a goodbye), the two survivors reconfigure the same group object to two members, and
later a new process (created with enable_reconfigure=True, so with no links of its own) takes
the lost rank's place; collectives are checked against their closed forms after each step."""
import datetime
import json
import os
import socket
import subprocess
import sys

import pytest
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

pytestmark = pytest.mark.skipif(not hasattr(dist.distributed_c10d, "_reconfigure"),
                                reason="torch before 2.14 has no reconfigure API")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_group_loses_a_rank_and_takes_a_new_one_back():
    port = _free_port()
    store = dist.TCPStore("127.0.0.1", port, is_master=True,
                          timeout=datetime.timedelta(seconds=120))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = {f"{role}{rank}": subprocess.Popen(
                 [sys.executable, os.path.join(HERE, "reconfigure_worker.py"), role, str(rank),
                  str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for role, rank in (("member", 0), ("member", 1), ("member", 2), ("newcomer", 2))}
    outputs = {}
    for name, p in procs.items():
        try:
            outputs[name] = p.communicate(timeout=150)[0]
        except subprocess.TimeoutExpired:
            for q in procs.values():
                q.kill()
            pytest.fail(f"{name} did not finish:\n{p.communicate()[0][-3000:]}")
    for name, p in procs.items():
        assert p.returncode == 0, f"{name} exited {p.returncode}:\n{outputs[name][-3000:]}"
    failed = []
    for name in procs:
        checks = json.loads(store.get(f"result/{name}").decode())
        assert checks, name
        failed += [f"{name}: {c[0]}: {c[2]}" for c in checks if not c[1]]
    assert not failed, "\n".join(failed)
    # Every step was checked where it should have been.
    names = {c[0] for c in json.loads(store.get("result/member0").decode())}
    assert {"survivors: all_reduce over 2", "reused uuid refused",
            "taken back: all_reduce over 3"} <= names, names
