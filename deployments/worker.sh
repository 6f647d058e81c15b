#!/usr/bin/env bash
# A process worker of the pool with `dbpa view` beside it, so that each run's report link in
# the Prefect UI opens in a browser (a browser does not open file:// links from a web page).
#
#   deployments/worker.sh [--pool dbpa] [--db RECORD] [--port 8765] [--limit N]
#
# RECORD is a DuckDB file (default: $DBPA_DB, else dbpa.duckdb) or a shared record's URL,
# postgresql://USER@HOST:PORT/DBNAME, with the password in PGPASSWORD or ~/.pgpass. The flow
# runs of this worker write it: the worker exports it as DBPA_DB. --limit caps the flow runs
# this worker runs at once (default: the pool's limit alone).
#
# Run it from anywhere with PREFECT_API_URL set; paths are relative to the repository root,
# as the deployments' are. Ctrl-C stops both (an idle worker needs a second Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."
pool=dbpa db=${DBPA_DB:-dbpa.duckdb} port=8765 limit=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --pool) pool=$2; shift 2 ;;
        --db) db=$2; shift 2 ;;
        --port) port=$2; shift 2 ;;
        --limit) limit=(--limit "$2"); shift 2 ;;
        *) echo "usage: $0 [--pool NAME] [--db RECORD] [--port PORT] [--limit N]" >&2; exit 2 ;;
    esac
done
export DBPA_DB=$db
.venv/bin/dbpa view --db "$db" --port "$port" &
viewer=$!
trap 'kill -TERM "$viewer" 2>/dev/null || true; wait "$viewer" 2>/dev/null || true' EXIT
.venv/bin/prefect worker start --pool "$pool" "${limit[@]}"
