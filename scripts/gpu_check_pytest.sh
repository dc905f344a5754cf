#!/usr/bin/env bash
# One capped pytest phase of scripts/gpu_check.sh, written so that a phase stopped by its cap
# still leaves its counts: at the cap pytest gets SIGINT (its KeyboardInterrupt path ends the
# session normally, so --junitxml is written with every test finished so far), and only if it
# is still running GRACE seconds later, SIGKILL. SIGTERM, timeout's default, kills pytest
# before it writes anything.
#
#   scripts/gpu_check_pytest.sh CAP_SECONDS XML LOG [pytest arguments...]
#
# Exit code: pytest's, or 124 when the cap stopped it (137 when it had to be killed).
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: scripts/gpu_check_pytest.sh CAP_SECONDS XML LOG [pytest arguments...]" >&2
  exit 2
fi
CAP=$1
XML=$2
LOG=$3
shift 3
PY=${PYTHON:-python3}
GRACE=${GPU_CHECK_GRACE:-10}
# The cap covers the grace too: pytest is interrupted GRACE seconds before it.
run_for=$((CAP > GRACE + 1 ? CAP - GRACE : 1))
TIMEOUT_ARGS=()
"$PY" -c "import pytest_timeout" 2>/dev/null && TIMEOUT_ARGS=(--timeout "$run_for")
timeout -s INT -k "$GRACE" "$run_for" "$PY" -m pytest -v -p no:cacheprovider -rsfE \
  --durations=0 --junitxml="$XML" "${TIMEOUT_ARGS[@]}" "$@" > "$LOG" 2>&1
rc=$?
[ $rc -eq 124 ] && echo "(gpu_check: stopped at its cap of $CAP s)" >> "$LOG"
exit $rc
