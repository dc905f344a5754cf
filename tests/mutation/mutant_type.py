"""One mutant of tests/mutation/mutate.py (the lists: mutants.py, mutants_hosts.py)."""
import dataclasses


@dataclasses.dataclass
class Mutant:
    name: str
    path: str    # relative to the tree
    find: str    # must occur exactly once
    replace: str
    kind: str    # "cpp": a gtest filter; "tsan": a gtest filter under TSan; "py": pytest args;
                 # "emu": pytest args for scripts/test_cuda_emulated.sh (torch over the emulator);
                 # "a64": a gtest filter for `binaries` cross-built for aarch64, run under qemu
    tests: str
    quick: bool = False  # part of the CI subset
    why: str = ""
    binaries: tuple = ("ring_unit_tests",)  # "cpp": the gtest programs to build and run
    timeout: int = 0  # seconds for its tests, when shorter than --timeout (a mutant that hangs)
    # CPU flags (/proc/cpuinfo's names) without which the mutated code never runs here (its
    # tests skip): on a CPU that lacks one the mutant cannot be killed, and is reported as not
    # applicable, not as killed or survived.
    needs: tuple = ()
