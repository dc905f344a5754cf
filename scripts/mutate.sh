#!/usr/bin/env bash
# Hand-picked mutants of the source, each built in a scratch copy and run against the tests that
# should catch it (the list and the rules: tests/mutation/mutate.py). Every mutant must be killed.
#   bash scripts/mutate.sh            # the whole list, by hand (tens of minutes)
#   bash scripts/mutate.sh --quick    # the CI subset (C++ and TSan mutants, a few minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 tests/mutation/mutate.py "$@"
