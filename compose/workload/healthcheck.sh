#!/usr/bin/env bash
# Health check of the workload container: some run finished in the last HEARTBEAT_MAX_AGE seconds. An
# analytic run can take minutes, but the OLTP loops finish every few seconds.
set -euo pipefail
max_age=${HEARTBEAT_MAX_AGE:-300}
last=$(stat -c %Y /tmp/workload.heartbeat)
[ $(( $(date +%s) - last )) -lt "$max_age" ]
