#!/usr/bin/env bash
# `make run`: the exporter against the config file given (CONFIG=path), or, without one, a DEMO:
# the exporter reading the bundled SQL Server stand-in, which plays a scenario over real TDS.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${CONFIG:-}" ]; then
    # Running the exporter needs the driver and the venv, not the test tools (Prometheus, Alertmanager).
    bash scripts/bootstrap.sh runtime
    # exec: the exporter takes this process's place, so make's SIGTERM and the terminal's signals reach it.
    exec .venv/bin/mssql-memory-exporter --config.file "$CONFIG" --web.listen-address "${LISTEN:-:9399}"
fi

bash scripts/bootstrap.sh standin  # the demo also runs the stand-in
# The demo is two processes that must start in order and stop together: scripts/demo.py supervises them
# and reads LISTEN, STANDIN_PORT, SCENARIO and STANDIN_ARGS. exec, for the same reason as above.
exec .venv/bin/python scripts/demo.py
