#!/usr/bin/env bash
# `make test`: every test, then the secret check over everything the run produced: the terminal output,
# every test's captured stdout/stderr/log records (passing tests included, logging at DEBUG; written by
# hooks in tests/conftest.py) and the log of every process the end-to-end stack started. A secret that
# reaches any of them fails CI even if no single test thought to look for it (tests/secret_check.py).
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
mkdir -p build
log=build/test-output.log
evidence=build/test-evidence
rm -rf "$evidence"
mkdir -p "$evidence"
export MSSQL_TEST_EVIDENCE_DIR="$PWD/$evidence"
"$python" -m pytest -q --durations=30 "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# The captured-output file must exist: if the hooks stopped writing it, the check would read nothing
# and pass; tests/secret_check.py refuses a missing path.
if ! PYTHONPATH=.:exporter "$python" -m tests.secret_check "$log" "$evidence/test-captured.log" "$evidence"; then
    exit 1
fi
exit "$status"
