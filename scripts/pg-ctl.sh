#!/usr/bin/env bash
# Control the local PostgreSQL from tests (outage simulation): the server of CDC_RELAY_DEV_PG_VERSION
# (15 by default), as scripts/dev-up.sh selects it.
#   stop     pg_ctl stop -m fast (clients are disconnected, a clean shutdown)
#   kill     pg_ctl stop -m immediate (a crash: recovery on next start)
#   start    start it as dev-up.sh does, and wait until it is ready
#   restart  stop, then start
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-}" in
stop) dev_lock; pg_stop fast ;;
kill) dev_lock; pg_stop immediate ;;
start) dev_lock; pg_up ;;
restart) dev_lock; pg_stop fast; pg_up ;;
*) die "usage: $0 {restart|stop|kill|start}" ;;
esac
