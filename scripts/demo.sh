#!/usr/bin/env bash
# The main job: set up (if needed), then the all_reduce demo on 4 local ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
NPROC=${NPROC:-4}
exec torchrun --nproc_per_node="$NPROC" examples/allreduce_demo.py "$@"
