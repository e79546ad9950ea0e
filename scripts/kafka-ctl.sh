#!/usr/bin/env bash
# Control the local Kafka broker from tests (outage simulation).
#   pause    SIGSTOP the JVM: it stops answering but connections are not refused
#   resume   SIGCONT it
#   kill     SIGKILL it and wait until it is gone (a crash)
#   stop     SIGTERM (controlled shutdown) and wait
#   start    start it as dev-up.sh does, and wait until it is ready (resumes it if paused)
#   restart  stop, then start
#   pid      print the JVM's pid (exit 1 if it is not running)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-}" in
pause) pid="$(kafka_pid)" || die "Kafka not running"; kill -STOP "$pid" ;;
resume) pid="$(kafka_pid)" || die "Kafka not running"; kill -CONT "$pid" ;;
kill) dev_lock; kafka_stop KILL ;;
stop) dev_lock; kafka_stop TERM ;;
start) dev_lock; kafka_up ;;
restart) dev_lock; kafka_stop TERM; kafka_up ;;
pid) kafka_pid ;;
*) die "usage: $0 {pause|resume|kill|stop|start|restart|pid}" ;;
esac
