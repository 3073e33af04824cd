#!/usr/bin/env bash
# `make test`: lint, then every test, with the whole run's output kept and searched afterwards for the
# passwords the tests use. A secret that reaches any log line, error message or exposition fails CI
# even if no single test thought to look for it.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
log=build/test-output.log
.venv/bin/pytest -q "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if ! PYTHONPATH=. .venv/bin/python - "$log" <<'PY'
import sys
from pathlib import Path

from tests.conftest import TEST_PASSWORD

text = Path(sys.argv[1]).read_text(errors="replace")
if TEST_PASSWORD in text:
    lines = [n for n, line in enumerate(text.splitlines(), 1) if TEST_PASSWORD in line]
    sys.exit(f"secret check: the test password appears in the test run's output (lines {lines[:10]})")
print("secret check: the test password appears nowhere in the test run's output")
PY
then
    exit 1
fi
exit "$status"
