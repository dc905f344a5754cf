#!/usr/bin/env bash
# What comes back from a GPU check: at most 7 files out of the many its phases write, plus one
# archive of them all. Run by scripts/gpu_check.sh's EXIT trap (so also after a phase was stopped
# at its cap or the script at its deadline).
#
#   scripts/gpu_check_gather.sh LOGS_DIR OUT_DIR
#
# Why: the GPU machine hands back at most 8 files from $OUT (16 MiB each); the check writes 13
# or more, and which ones came back was chance: the log with the failing traceback could be lost.
# What comes back, in order of need:
#   summary.log        one screen (scripts/gpu_check_summary.py)
#   phases.log         each phase's start and exit, with seconds
#   probe.log          the machine: Python headers, nvcc, compute mode, CUDA IPC
#   build_tail.log     the module's last 80 lines (prebuilt or built)
#   failed_tests.log   every test phase's log that holds a failure or an error, whole (capped)
#   smoke.log          the smoke phase, whole
#   stress.log         the ordering stress phase, whole
#   all_logs.tar.gz    everything LOGS_DIR holds
set -uo pipefail
LOGS=$1
OUT=$2
mkdir -p "$OUT"
# 15 MiB: under the 16 MiB a returned file may have.
CAP_BYTES=$((15 * 1024 * 1024))
copy_capped() {  # SRC DEST: the first CAP_BYTES of SRC
  [ -f "$1" ] && head -c "$CAP_BYTES" "$1" > "$2"
}
copy_capped "$LOGS/summary.log" "$OUT/summary.log"
copy_capped "$LOGS/.phases" "$OUT/phases.log"
copy_capped "$LOGS/probe.log" "$OUT/probe.log"
[ -f "$LOGS/build.log" ] && tail -n 80 "$LOGS/build.log" > "$OUT/build_tail.log"
copy_capped "$LOGS/smoke.log" "$OUT/smoke.log"
copy_capped "$LOGS/stress.log" "$OUT/stress.log"
failed=()
for log in "$LOGS"/tests*.log; do
  [ -f "$log" ] || continue
  # pytest -rfE's short summary and -v's result words: a failing or erroring test, or a phase
  # that never reached its summary line (stopped at its cap).
  if grep -qE '(^(FAILED|ERROR) |(FAILED|ERROR)( +\[|$))' "$log" ||
     ! grep -qE '^=+ .*(passed|failed|error|skipped|no tests).* =+$' "$log"; then
    failed+=("$log")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  for log in "${failed[@]}"; do
    echo "======== $(basename "$log")"
    cat "$log"
  done | head -c "$CAP_BYTES" > "$OUT/failed_tests.log"
fi
tar -czf "$OUT/all_logs.tar.gz" -C "$LOGS" . 2>/dev/null
exit 0
