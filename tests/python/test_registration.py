"""How "ring" becomes known to torch, and what happens when the module does not fit the torch
that loads it: the torch.distributed.backends entry point (torch 2.14 looks an unknown backend
name up there, so a training script that never imports this package still gets "ring"), and
the one-line refusal of a module built against another torch."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch.distributed as dist

import torch_ring_backend

PACKAGE = os.path.dirname(os.path.abspath(torch_ring_backend.__file__))


def _run(code, env=None, cwd=None):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd)


@pytest.mark.skipif(not hasattr(dist.Backend, "_ensure_backend_registered"),
                    reason="this torch does not look backends up through entry points (2.14+)")
@pytest.mark.parametrize("spec", ["ring", "cpu:ring,cuda:ring"])
def test_a_script_that_never_imports_the_package_gets_ring(spec, tmp_path):
    out = _run(f"""
        import sys
        import torch, torch.distributed as dist
        assert "torch_ring_backend" not in sys.modules
        dist.init_process_group({spec!r}, init_method="file://{tmp_path}/init", rank=0,
                                world_size=1)
        x = torch.ones(3)
        dist.all_reduce(x)
        sub = dist.new_group([0], backend={spec!r})
        dist.all_reduce(x, group=sub)
        backend = dist.group.WORLD._get_backend(torch.device("cpu"))
        print("loaded" if "torch_ring_backend" in sys.modules else "not loaded",
              type(backend).__name__, dist.get_backend(), x.tolist())
        dist.destroy_process_group()
    """, cwd=str(tmp_path))  # not the source tree: the installed package's metadata only
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["loaded", "RingBackend", spec, "[1.0,", "1.0,", "1.0]"], out.stdout


def test_a_module_built_for_another_torch_is_refused_in_one_line(tmp_path):
    # A copy of the package whose module says it was built against another torch.
    copy = tmp_path / "torch_ring_backend"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_C.torch_version").write_text("1.99.0+imaginary\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = _run("import torch_ring_backend", env=env, cwd=str(tmp_path))
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: torch_ring_backend was built against torch "
                           "1.99.0+imaginary but torch "), last
    assert "rebuild it with `pip install --no-build-isolation --force-reinstall .`" in last, last
    assert "undefined symbol" not in out.stderr


def test_the_module_records_the_torch_it_was_built_against():
    import torch
    with open(os.path.join(PACKAGE, "_C.torch_version")) as f:
        assert f.read().strip() == torch.__version__


def recorder_hook_case(ctx):
    c10d = dist.distributed_c10d
    hooks = getattr(c10d._world, "pg_flight_recorder_hooks", {})
    return {"listed": "ring" in c10d._FR_SELF_RECORDING_BACKENDS,
            "hooked": dist.group.WORLD in hooks}


@pytest.mark.skipif(not hasattr(dist.distributed_c10d, "_FR_SELF_RECORDING_BACKENDS"),
                    reason="this torch attaches no flight-recorder hook to backends (before 2.15)")
@pytest.mark.parametrize("world", [2])
def test_torch_does_not_hook_its_flight_recorder_onto_ring(pool, world):
    # torch 2.15 hooks its recorder onto every group whose backend does not record itself;
    # ring does, so it says so, and its group carries no second recorder.
    for r in pool.run(recorder_hook_case):
        assert r == {"listed": True, "hooked": False}, r
