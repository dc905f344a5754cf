"""The reference logic of the GPU tests (test_cuda.py), checked where there is no GPU: its rank
functions run on the CPU path with the same expected values, and must find nothing wrong;
a wrong expectation there would otherwise first show up on a rare GPU machine."""
import test_cuda


def test_the_gpu_tests_reference_logic_holds_on_the_cpu_path():
    result = test_cuda.run_on_cpu(world=2)
    assert all(n >= 26 for n in result["checked"]), result["checked"]
    for errors in result["errors"]:
        # (Both "devices" are the CPU here: the mixed-devices call is valid on this path.)
        assert errors["mixed devices"] is None, errors
        assert "not contiguous" in (errors["non-contiguous"] or ""), errors
