#!/usr/bin/env bash
# `make run`: the exporter against the config file given (CONFIG=path), or, without one, a DEMO:
# the exporter reading the bundled SQL Server stand-in, which plays a scenario over real TDS.
set -euo pipefail
cd "$(dirname "$0")/.."
listen=${LISTEN:-:9399}
if [ -n "${CONFIG:-}" ]; then
    # Running the exporter needs the driver and the venv, not the test tools (Prometheus, Alertmanager).
    bash scripts/bootstrap.sh runtime
    exec .venv/bin/mssql-memory-exporter --config.file "$CONFIG" --web.listen-address "$listen"
fi

bash scripts/bootstrap.sh standin  # the demo also runs the stand-in
scenario=${SCENARIO:-memory-pressure}
port=${STANDIN_PORT:-14330}
mkdir -p build
MSSQL_STANDIN_PASSWORD=$(.venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(18))')
export MSSQL_STANDIN_PASSWORD
cat > build/demo-config.yml <<YAML
# Written by scripts/run.sh for the demo; the password is generated per run and passed by environment.
default_target: demo
auth_modules:
  demo:
    username: exporter
    password_env: MSSQL_STANDIN_PASSWORD
targets:
  demo:
    host: 127.0.0.1
    port: $port
    driver: freetds
    encryption: "off"
    workload: oltp
    labels: {scenario: $scenario}
    auth_module: demo
YAML
# STANDIN_ARGS: faults on a timetable for the demo, e.g. "--fault hang_batch@60-90" (tests/standin/schedule.py).
# shellcheck disable=SC2086
PYTHONPATH=. .venv/bin/python -m tests.standin --scenario "$scenario" --port "$port" ${STANDIN_ARGS:-} &
standin=$!
trap 'kill $standin 2>/dev/null || true' EXIT
cat >&2 <<BANNER

  ============================================================================
   DEMO MODE: no CONFIG given, so the exporter reads the bundled SQL Server
   stand-in (a test double speaking TDS), playing the '$scenario' scenario.
   This is not a real SQL Server.   Point it at yours:  make run CONFIG=my.yml

   Metrics:   curl -s localhost:${listen##*:}/probe?target=demo
              curl -s localhost:${listen##*:}/metrics
  ============================================================================

BANNER
.venv/bin/mssql-memory-exporter --config.file build/demo-config.yml --web.listen-address "$listen"
