#!/usr/bin/env bash
# The bundle's demo workload: OLTP_WORKERS loops of oltp.sql, ANALYTICS_WORKERS loops of analytics.sql and
# WRITE_WORKERS loops of writes.sql against the demo database, as sa (a demo shortcut; the exporter itself uses its least-privilege login).
# A failed run (SQL Server restarting, a deadlock) is logged and retried after a pause; the container's
# health check watches a heartbeat file that every finished run touches.
set -euo pipefail
# shellcheck source=../mssql/sqlcmd.sh
. /opt/bundle/mssql/sqlcmd.sh
cd /opt/bundle/workload

SA_PASSWORD=$(read_secret mssql_sa_password)
DEMO_DATABASE=${DEMO_DATABASE:-demo_sales}
OLTP_WORKERS=${OLTP_WORKERS:-4}
ANALYTICS_WORKERS=${ANALYTICS_WORKERS:-2}
ANALYTICS_PAUSE_SECONDS=${ANALYTICS_PAUSE_SECONDS:-5}
WRITE_WORKERS=${WRITE_WORKERS:-1}
HEARTBEAT=/tmp/workload.heartbeat

run_loop() {
    local name=$1 file=$2 pause=$3
    while true; do
        if sa_sqlcmd -d "$DEMO_DATABASE" -i "$file" -o /dev/null; then
            touch "$HEARTBEAT"
        else
            log "$name: run failed; retrying in 10 s"
            sleep 10
        fi
        sleep "$pause"
    done
}

wait_for_sql 600
log "starting ${OLTP_WORKERS} OLTP, ${ANALYTICS_WORKERS} analytic and ${WRITE_WORKERS} writer workers on ${DEMO_DATABASE}"
touch "$HEARTBEAT"
for i in $(seq 1 "$OLTP_WORKERS"); do
    run_loop "oltp-$i" oltp.sql 0 &
done
for i in $(seq 1 "$ANALYTICS_WORKERS"); do
    run_loop "analytics-$i" analytics.sql "$ANALYTICS_PAUSE_SECONDS" &
done
for i in $(seq 1 "$WRITE_WORKERS"); do
    run_loop "writes-$i" writes.sql 0 &
done
wait
