#!/usr/bin/env bash
# `make dashboards-look`: look at the dashboards in a real Grafana 12.4 against a live demo stack.
#
# A developer check, not CI: it needs a Grafana 12.4 installation at GRAFANA_HOME (bin/linux-amd64/grafana
# and public/build/; Grafana is a tool here and lives outside the repository) and some data. It starts four
# SQL Server stand-ins (memory-pressure, micron-960gb-8stream and an availability-group pair that fails
# over 5 minutes in), an exporter for the first two each (the micron one with --collector.host and an SSD
# pool) and one for the pair, and Debian's Prometheus scraping them with the bundle's rules,
# waits WAIT_S seconds, renders every dashboard to PNG with ../shared/tools/grafana-modern/render.sh into
# OUT, prints OUT/summary.txt (panels with errors or no data) and stops everything it started, on every
# exit path. With GRAFANA9_HOME set (a Grafana 9.3.2 build) it renders them there too, with
# ../shared/tools/grafana/render.sh, into OUT/grafana-9 (an optional second look).
#
#   GRAFANA_HOME=... bash scripts/dashboards-look.sh            # stack, wait, render, summary, stop
#   bash scripts/dashboards-look.sh --serve                     # stack only, until Ctrl-C
#   PROM_URL=http://127.0.0.1:19290 GRAFANA_HOME=... bash scripts/dashboards-look.sh   # a running stack
#
# Env: GRAFANA_HOME (required to render), GRAFANA_TOOLS (../shared/tools/grafana-modern from the repo),
# GRAFANA9_HOME and GRAFANA9_TOOLS (../shared/tools/grafana), OUT (build/dashboards-look), WAIT_S (300),
# DASHBOARDS (the directory of the dashboards and their provisioning/, dashboards),
# PORT_BASE (19200: uses PORT_BASE+1..+99), EXTRA_RULES (more rule files for Prometheus, a glob),
# VARS_MEMORY (var-instance=pressure), VARS_AG (var-instance=sqlag1), FROM/TO/VARS/WIDTH/KIOSK (render.sh).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
GRAFANA_HOME=${GRAFANA_HOME:-}
GRAFANA_TOOLS=${GRAFANA_TOOLS:-$ROOT/../shared/tools/grafana-modern}
[[ -d $GRAFANA_TOOLS ]] || GRAFANA_TOOLS=/work/shared/tools/grafana-modern
GRAFANA9_HOME=${GRAFANA9_HOME:-}
GRAFANA9_TOOLS=${GRAFANA9_TOOLS:-$ROOT/../shared/tools/grafana}
[[ -d $GRAFANA9_TOOLS ]] || GRAFANA9_TOOLS=/work/shared/tools/grafana
OUT=${OUT:-$ROOT/build/dashboards-look}
BOARDS=$(cd "${DASHBOARDS:-dashboards}" && pwd)  # another checkout's dashboards/ may be rendered too
WAIT_S=${WAIT_S:-300}
BASE=${PORT_BASE:-19200}
SERVE=0
[[ ${1:-} == --serve ]] && SERVE=1
fail() { echo "dashboards-look: $*" >&2; exit 1; }

if [[ $SERVE == 0 ]] && [[ -z $GRAFANA_HOME || ! -x $GRAFANA_HOME/bin/linux-amd64/grafana ||
  ! -f $GRAFANA_HOME/public/build/assets-manifest.json ]]; then
  echo "dashboards-look: needs a Grafana 12.4 installation at GRAFANA_HOME" \
    "(bin/linux-amd64/grafana and public/build/; GRAFANA_HOME=${GRAFANA_HOME:-unset})" >&2
  exit 2
fi
if [[ -n $GRAFANA9_HOME && ! -x $GRAFANA9_HOME/bin/linux-amd64/grafana-server ]]; then
  echo "dashboards-look: GRAFANA9_HOME=$GRAFANA9_HOME has no Grafana 9.3.2 (bin/linux-amd64/grafana-server)" >&2
  exit 2
fi
bash scripts/bootstrap.sh standin >/dev/null  # the exporter and the stand-in; nothing else
command -v prometheus >/dev/null || fail "no prometheus binary (Debian: apt-get install prometheus)"

RUN=$ROOT/build/dashboards-look-stack-$BASE  # per port base: two stacks never share a directory
PIDS=()
stop_all() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  done
  [[ ${#PIDS[@]} -gt 0 ]] && echo "dashboards-look: stopped ${#PIDS[@]} processes"
  PIDS=()
}
trap stop_all EXIT
trap 'exit 130' INT TERM HUP

wait_http() {  # URL SECONDS WHAT
  local end=$((SECONDS + $2))
  until curl -fsS -m 2 -o /dev/null "$1" 2>/dev/null; do
    ((SECONDS < end)) || fail "$3 did not answer $1 within $2 s (logs: $RUN/*.log)"
    sleep 1
  done
}

start_stack() {
  rm -rf "$RUN"; mkdir -p "$RUN/rules" "$RUN/tsdb"
  local pressure_db=$((BASE + 1)) micron_db=$((BASE + 2)) pressure_ex=$((BASE + 11)) micron_ex=$((BASE + 12))
  local ag_a_db=$((BASE + 3)) ag_b_db=$((BASE + 4)) ag_ex=$((BASE + 13))
  PROM_PORT=$((BASE + 90))
  for port in $pressure_db $micron_db $ag_a_db $ag_b_db $pressure_ex $micron_ex $ag_ex $PROM_PORT; do
    ! curl -s -m 1 -o /dev/null "http://127.0.0.1:$port/" || fail "port $port is in use (set PORT_BASE)"
  done
  MSSQL_STANDIN_PASSWORD=$(.venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(18))')
  export MSSQL_STANDIN_PASSWORD
  # A physical disk of this machine for the pool's host source (what the host collector reports).
  local disk
  disk=$(PYTHONPATH=exporter .venv/bin/python -c \
    'from mssql_memory_exporter.host.collector import HostCollector as H; print(sorted(H().written_bytes_by_disk())[0])')
  # Drive health from real smartctl outputs (tests/smartctl_testdata) replayed by the tests' fake smartctl:
  # an NVMe drive in a pool of its own and a SATA SSD that reports its flash writes.
  local smartctl
  smartctl=$(PYTHONPATH=. .venv/bin/python -c "
from pathlib import Path
from tests.fake_smartctl import FakeSmartctl
fake = FakeSmartctl(Path('$RUN/smartctl'))
fake.replay('nvme0n1', 'nvme-null-Micron_7300_MTFDHBE960TDF-nvme0.json')
fake.replay('sdf', 'sat-Intel_730_and_DC_S35x0_3610_3700_Series_SSDs-INTEL_SSDSC2BB016T4-sdf.json')
print(fake.path)")
  local tempdb=/var/opt/mssql/tempdb name scenario port
  for name in pressure micron; do
    if [[ $name == pressure ]]; then scenario=memory-pressure port=$pressure_db; else scenario=micron-960gb-8stream port=$micron_db; fi
    PYTHONPATH=. .venv/bin/python -m tests.standin --scenario $scenario --host 127.0.0.1 --port "$port" \
      >"$RUN/standin-$name.log" 2>&1 &
    PIDS+=($!)
    cat >"$RUN/exporter-$name.yml" <<YAML
# Written by scripts/dashboards-look.sh. default_target as in the demo: the target's series are on
# /metrics too, which the dashboards' SQL Server selector must not count a second time.
default_target: $name
auth_modules: {demo: {username: exporter, password_env: MSSQL_STANDIN_PASSWORD}}
targets:
  $name:
    host: 127.0.0.1
    port: $port
    driver: freetds
    encryption: 'off'
    auth_module: demo
    labels: {env: demo}
    query_timeout_seconds: 10
YAML
  done
  cat >>"$RUN/exporter-micron.yml" <<YAML
    workload: olap
    colocated: true
    volume_map: {$tempdb: $tempdb}
    ssd_pools:
      nvme-tempdb:   # Micron's four 7450 PRO 3.84 TB drives, 7000 TBW each, five years from 2025-01-01
        drives: {count: 4, tbw_per_drive_tb: 7000}
        planned_lifetime_years: 5
        in_service_date: 2025-01-01
        volumes: [$tempdb]
        host_disks: [$disk]
      micron-7300:   # one Micron 7300 PRO 960 GB read through a fake smartctl (a real drive's output)
        drives: {count: 1, tbw_per_drive_tb: 1400}
        planned_lifetime_years: 5
        in_service_date: 2025-01-01
        smart_drives: [nvme0n1]
drive_health:
  smartctl: $smartctl
  drives: [{name: nvme0n1}, {name: sdf}]
YAML
  # An availability-group pair (sqlag1 the primary of ag1 until 5 minutes in, then sqlag2): the role-change
  # marks and the alerts that follow the primary. One exporter for both, as for replicas on one network.
  for name in ag-pair-a ag-pair-b; do
    if [[ $name == ag-pair-a ]]; then port=$ag_a_db; else port=$ag_b_db; fi
    PYTHONPATH=. .venv/bin/python -m tests.standin --scenario $name --host 127.0.0.1 --port "$port" \
      >"$RUN/standin-$name.log" 2>&1 &
    PIDS+=($!)
  done
  cat >"$RUN/exporter-ag.yml" <<YAML
# Written by scripts/dashboards-look.sh: the two replicas of ag1, each a target of its own.
auth_modules: {demo: {username: exporter, password_env: MSSQL_STANDIN_PASSWORD}}
targets:
  sqlag1: {host: 127.0.0.1, port: $ag_a_db, driver: freetds, encryption: 'off', auth_module: demo, labels: {env: demo}}
  sqlag2: {host: 127.0.0.1, port: $ag_b_db, driver: freetds, encryption: 'off', auth_module: demo, labels: {env: demo}}
YAML
  .venv/bin/mssql-memory-exporter --config.file "$RUN/exporter-ag.yml" \
    --web.listen-address "127.0.0.1:$ag_ex" >"$RUN/exporter-ag.log" 2>&1 &
  PIDS+=($!)
  .venv/bin/mssql-memory-exporter --config.file "$RUN/exporter-pressure.yml" \
    --web.listen-address "127.0.0.1:$pressure_ex" >"$RUN/exporter-pressure.log" 2>&1 &
  PIDS+=($!)
  .venv/bin/mssql-memory-exporter --config.file "$RUN/exporter-micron.yml" --collector.host \
    --web.listen-address "127.0.0.1:$micron_ex" >"$RUN/exporter-micron.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$pressure_ex/metrics" 60 "the pressure exporter"
  wait_http "http://127.0.0.1:$micron_ex/metrics" 60 "the micron exporter"
  wait_http "http://127.0.0.1:$ag_ex/metrics" 60 "the availability-group exporter"

  cp alerts/rules/*.rules.yml "$RUN/rules/"
  if [[ -n ${EXTRA_RULES:-} ]]; then
    # shellcheck disable=SC2086
    cp $EXTRA_RULES "$RUN/rules/"
  fi
  cat >"$RUN/prometheus.yml" <<YAML
# Written by scripts/dashboards-look.sh: the compose bundle's jobs, on loopback ports.
global: {scrape_interval: 15s, scrape_timeout: 10s, evaluation_interval: 15s}
rule_files: [rules/*.rules.yml]
scrape_configs:
  - job_name: mssql
    metrics_path: /probe
    static_configs:
      - {targets: [pressure], labels: {__address__exporter: 127.0.0.1:$pressure_ex}}
      - {targets: [micron], labels: {__address__exporter: 127.0.0.1:$micron_ex}}
      - {targets: [sqlag1, sqlag2], labels: {__address__exporter: 127.0.0.1:$ag_ex}}
    relabel_configs:
      - {source_labels: [__address__], target_label: __param_target}
      - {source_labels: [__param_target], target_label: instance}
      - {source_labels: [__address__exporter], target_label: __address__}
  - job_name: mssql-exporter
    static_configs:
      - targets: [127.0.0.1:$pressure_ex, 127.0.0.1:$micron_ex, 127.0.0.1:$ag_ex]
YAML
  promtool check config "$RUN/prometheus.yml" >"$RUN/promtool.log" 2>&1 || fail "$(cat "$RUN/promtool.log")"
  prometheus --config.file "$RUN/prometheus.yml" --storage.tsdb.path "$RUN/tsdb" \
    --web.listen-address "127.0.0.1:$PROM_PORT" --web.enable-lifecycle >"$RUN/prometheus.log" 2>&1 &
  PIDS+=($!)
  PROM_URL=http://127.0.0.1:$PROM_PORT
  wait_http "$PROM_URL/-/ready" 60 "Prometheus"
  echo "dashboards-look: stack up: Prometheus $PROM_URL, exporters :$pressure_ex (pressure) :$micron_ex (micron)" \
    ":$ag_ex (sqlag1, sqlag2)"
}

if [[ -z ${PROM_URL:-} ]]; then
  start_stack
  if [[ $SERVE == 1 ]]; then
    echo "dashboards-look: serving until interrupted (render: PROM_URL=$PROM_URL bash $0)"
    while :; do sleep 3600 & wait $!; done  # wait, not a foreground sleep: signals are handled at once
  fi
  echo "dashboards-look: collecting data for $WAIT_S s"
  sleep "$WAIT_S" & wait $!
fi
rm -rf "$OUT"; mkdir -p "$OUT"
# Each dashboard as a DBA opens it: the memory dashboard on the instance under memory pressure, the others
# on their defaults (the endurance dashboard must open on an instance with pools by itself); and the memory
# dashboard once more on a replica of the availability group, whose failover marks it shows (into OUT/ag).
render() {  # TOOLS HOME OUT NAME VARS DASHBOARD.json...
  local tools=$1 home=$2 out=$3 name=$4 vars=$5; shift 5
  mkdir -p "$out/$name/dashboards"; cp "$@" "$out/$name/dashboards/"
  VARS=$vars PORT=${GRAFANA_PORT:-$((BASE + 80))} bash "$tools/render.sh" "$home" "$PROM_URL" \
    "$out/$name/dashboards" "$out/$name" "$BOARDS/provisioning" >"$out/$name/render.log" 2>&1 ||
    fail "render.sh failed, see $out/$name/render.log"
  [[ $name == ag ]] || cp "$out/$name"/*.png "$out/"
  cat "$out/$name/summary.txt" >>"$out/summary.txt"
}
look() {  # TOOLS HOME OUT
  render "$@" memory "${VARS_MEMORY:-var-instance=pressure}" "$BOARDS/mssql-memory-pressure.json"
  local others=() board
  for board in "$BOARDS"/*.json; do [[ $board == */mssql-memory-pressure.json ]] || others+=("$board"); done
  render "$@" defaults "${VARS:-}" "${others[@]}"  # every other dashboard of this checkout
  render "$@" ag "${VARS_AG:-var-instance=sqlag1}" "$BOARDS/mssql-memory-pressure.json"
}
look "$GRAFANA_TOOLS" "$GRAFANA_HOME" "$OUT"
[[ -z $GRAFANA9_HOME ]] || { mkdir -p "$OUT/grafana-9"; look "$GRAFANA9_TOOLS" "$GRAFANA9_HOME" "$OUT/grafana-9"; }
echo "dashboards-look: PNGs in $OUT (view the <uid>.tile-NN.png slices to read labels)"
cat "$OUT/summary.txt"
