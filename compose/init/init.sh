#!/usr/bin/env bash
# One-shot set-up of the bundle's SQL Server, run by the mssql-init service after every `up`. Each step
# is idempotent, so a second run changes nothing (except the exporter login's password, which follows
# compose/.env).
#
#   1. server settings: max server memory low, so the demo database cannot fit in the buffer pool;
#   2. tempdb onto its own volume (/var/opt/mssql/tempdb), which needs one restart of SQL Server;
#   3. the exporter's least-privilege login, exactly as docs/permissions.md creates it for 2022;
#   4. the demo database, larger than the buffer pool (generated rows);
#   5. the login checked as docs/permissions.md "Checking it" does, impersonated by sa.
set -euo pipefail
# shellcheck source=../mssql/sqlcmd.sh
. /opt/bundle/mssql/sqlcmd.sh
cd /opt/bundle/init

SA_PASSWORD=$(read_secret mssql_sa_password)
monitor_password=$(read_secret mssql_monitor_password)
# sqlcmd reads $(VARIABLE) from the environment; the value goes into an N'...' literal, so double its quotes.
export MONITOR_PASSWORD_SQL=${monitor_password//\'/\'\'}
unset monitor_password
export MONITOR_LOGIN=${MONITOR_LOGIN:-prometheus_mssql}
export MAX_SERVER_MEMORY_MB=${MAX_SERVER_MEMORY_MB:-1024}
export TEMPDB_DIR=${TEMPDB_DIR:-/var/opt/mssql/tempdb}
export DEMO_DATABASE=${DEMO_DATABASE:-demo_sales}
export DEMO_ROWS=${DEMO_ROWS:-12000000}

log "waiting for SQL Server at ${MSSQL_HOST}:${MSSQL_PORT}"
wait_for_sql 300

log "1/5 max server memory ${MAX_SERVER_MEMORY_MB} MB"
sa_sqlcmd -i 01-server.sql

log "2/5 tempdb on ${TEMPDB_DIR}"
pending=$(sa_sqlcmd -h -1 -W -i 02-tempdb.sql | sed -n 's/^pending=\([0-9][0-9]*\)$/\1/p')
if [ -z "$pending" ]; then
    log "could not read the tempdb file locations"
    exit 1
fi
if [ "$pending" -gt 0 ]; then
    # MODIFY FILE takes effect when tempdb is created again, at the next start. The service's restart
    # policy (unless-stopped) brings SQL Server back after SHUTDOWN.
    log "restarting SQL Server to move ${pending} tempdb file(s)"
    sa_sqlcmd -Q "SHUTDOWN;" >/dev/null 2>&1 || true
    sleep 10
    wait_for_sql 300
    pending=$(sa_sqlcmd -h -1 -W -i 02-tempdb.sql | sed -n 's/^pending=\([0-9][0-9]*\)$/\1/p')
    if [ "$pending" != 0 ]; then
        log "tempdb is still not on ${TEMPDB_DIR} after the restart (${pending:-?} file(s) elsewhere)"
        exit 1
    fi
fi

log "3/5 login ${MONITOR_LOGIN} (VIEW SERVER PERFORMANCE STATE, VIEW ANY DEFINITION)"
sa_sqlcmd -i 03-login.sql

log "4/5 database ${DEMO_DATABASE} with ${DEMO_ROWS} rows (the first run takes a few minutes)"
sa_sqlcmd -t 0 -i 04-demo-db.sql

log "5/5 checking what ${MONITOR_LOGIN} can read"
sa_sqlcmd -h -1 -W -i 05-check-login.sql
log "done"
