"""`python -m torch_ring_backend.bench [arguments]`: the torch-ring-bench command, same
arguments, output and exit codes (0 all correct, 1 a rank failed or a wrong element, 2 bad
arguments, 130 interrupted)."""
import sys

from .launch import main

if __name__ == "__main__":
    sys.exit(main())
