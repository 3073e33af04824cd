# Shared by the SQL Server containers of the bundle (health check, init, workload). Sourced, not run.
#
# Passwords come from files under /run/secrets (Compose secrets made from compose/.env) and reach sqlcmd
# through its SQLCMDPASSWORD environment variable, never through -P: a command line is visible to every
# user of the host in `ps`, an environment is not.

# The 2022 images since CU14 ship mssql-tools18 (ODBC Driver 18, encrypts by default); older ones had
# /opt/mssql-tools.
if [ -x /opt/mssql-tools18/bin/sqlcmd ]; then
    SQLCMD=/opt/mssql-tools18/bin/sqlcmd
else
    SQLCMD=/opt/mssql-tools/bin/sqlcmd
fi

MSSQL_HOST=${MSSQL_HOST:-mssql}
MSSQL_PORT=${MSSQL_PORT:-1433}

log() {
    printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${0##*/}" "$*" >&2
}

# read_secret NAME: the content of /run/secrets/NAME (Compose writes the .env value without a newline).
read_secret() {
    local file="/run/secrets/$1"
    if [ ! -r "$file" ] || [ ! -s "$file" ]; then
        log "secret $1 is missing or empty: set it in compose/.env (see compose/.env.example)"
        return 1
    fi
    cat -- "$file"
}

# sa_sqlcmd ARGS...: sqlcmd as sa against the bundle's server. -C trusts the container's self-signed
# certificate (the session is still encrypted), -b exits non-zero on an error, -r1 sends errors to stderr.
sa_sqlcmd() {
    SQLCMDPASSWORD="$SA_PASSWORD" "$SQLCMD" -S "tcp:${MSSQL_HOST},${MSSQL_PORT}" -U sa -C -b -r1 -l 15 "$@"
}

# wait_for_sql SECONDS: until sa can run a query, or give up.
wait_for_sql() {
    local deadline=$((SECONDS + $1))
    until sa_sqlcmd -Q "SET NOCOUNT ON; SELECT 1;" -h -1 >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "SQL Server at ${MSSQL_HOST}:${MSSQL_PORT} did not answer within $1 s"
            return 1
        fi
        sleep 3
    done
}
