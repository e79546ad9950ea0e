#!/usr/bin/env bash
# The backlog reader side by side, in one run: paced against plain reads, draining 1-row and
# 100-row transaction backlogs, (1) from the local PostgreSQL over loopback and (2) from a
# PostgreSQL in a network namespace one hop away, 0.5 ms each way (1 ms round trip), which this
# script sets up and removes. This kernel has no netem (CONFIG_NET_SCH_NETEM is not set and
# there are no modules), so the hop is tools/cmd/delayhop: two TUN devices, one in each
# namespace, and a process that copies every packet across after 0.5 ms; each side runs its
# own TCP stack, as on two hosts. Each drain is repeated, interleaved (pg_recvlogical, paced,
# plain, pg_recvlogical, ...), and cdc-bench reports medians and every run.
#
#   eval "$(scripts/dev-up.sh)"          # Kafka and the loopback PostgreSQL
#   results/2026-12-01-reader/run.sh     # as root (ip netns, TUN); REPEATS=5 BACKLOG=50000 PARTS='loopback hop'
#
# It writes loopback/ and hop/ (cdc-bench's table.md, report.json and logs) next to itself.
# The relay is built from commit REV (default 30dbca4, the last with paced reads), where
# CDC_RELAY_BACKLOG_PACE selects the reader (same-host: paced over loopback; always: paced over
# any TCP; off: plain, the reader that replaced it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
: "${CDC_RELAY_PG_URL:?run eval \"\$(scripts/dev-up.sh)\" first}" "${CDC_RELAY_BROKERS:?}"
: "${CDC_RELAY_DEV_PG_BIN:=/usr/lib/postgresql/15/bin}"
[[ $EUID == 0 ]] || { echo "run as root: the network namespace needs it" >&2; exit 2; }
command -v ip >/dev/null || apt-get install -y iproute2 >&2
REPEATS="${REPEATS:-5}" BACKLOG="${BACKLOG:-50000}" PARTS="${PARTS:-loopback hop}"
NS=cdcrelay_reader HOST_IF=cdcr-h NS_IF=cdcr-n HOST_IP=10.213.0.1 NS_IP=10.213.0.2 DELAY=500us
NET_PG_PORT="${NET_PG_PORT:-55639}"
work="$(mktemp -d)"
data="$work/pg"

cleanup() {
	runuser -u postgres -- "$CDC_RELAY_DEV_PG_BIN/pg_ctl" stop -D "$data" -m immediate -s >/dev/null 2>&1 || true
	[[ -z "${hop:-}" ]] || kill "$hop" 2>/dev/null || true
	ip netns del "$NS" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

cd "$root"
mkdir "$work/src" && git archive "${REV:-30dbca4}" | tar -x -C "$work/src"
(cd "$work/src" && go build -o "$work/cdc-relay" ./cmd/cdc-relay)
(cd tools && go build -o "$work/cdc-bench" ./cmd/cdc-bench && go build -o "$work/delayhop" ./cmd/delayhop)

bench() { # label, cdc-bench flags...
	local label=$1
	shift
	rm -rf "${here:?}/$label"
	"$work/cdc-bench" --skip-steady --backlog "$BACKLOG" --repeats "$REPEATS" --relay-bin "$work/cdc-relay" \
		--out "$work/out-$label" "$@" >"$work/$label.txt"
	mv "$(readlink -f "$work/out-$label/latest")" "$here/$label"
}

# 1. Loopback: PostgreSQL on this host, where pacing applies by default.
[[ $PARTS == *loopback* ]] && bench loopback --publishers "run@CDC_RELAY_BACKLOG_PACE=same-host,run@CDC_RELAY_BACKLOG_PACE=off"

# 2. A network hop: PostgreSQL inside a network namespace, 0.5 ms each way.
[[ $PARTS == *hop* ]] || exit 0
ip netns add "$NS"
"$work/delayhop" --a "$HOST_IF" --b "$NS_IF" --delay "$DELAY" >"$work/hop.out" 2>&1 &
hop=$!
until grep -q ready "$work/hop.out"; do kill -0 "$hop" && sleep 0.1; done
ip link set "$NS_IF" netns "$NS"
ip addr add "$HOST_IP" peer "$NS_IP" dev "$HOST_IF"
ip link set "$HOST_IF" mtu 9000 up
ip netns exec "$NS" ip addr add "$NS_IP" peer "$HOST_IP" dev "$NS_IF"
ip netns exec "$NS" ip link set "$NS_IF" mtu 9000 up
ip netns exec "$NS" ip link set lo up
mkdir -p "$data" && chown postgres: "$work" "$data" && chmod 0700 "$data"
runuser -u postgres -- "$CDC_RELAY_DEV_PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
cat >>"$data/postgresql.conf" <<EOF
listen_addresses = '$NS_IP'
port = $NET_PG_PORT
unix_socket_directories = '$data'
wal_level = logical
max_replication_slots = 40
max_wal_senders = 40
shared_buffers = 256MB
EOF
echo "host all all $HOST_IP/32 trust" >>"$data/pg_hba.conf"
echo "host replication all $HOST_IP/32 trust" >>"$data/pg_hba.conf"
ip netns exec "$NS" runuser -u postgres -- "$CDC_RELAY_DEV_PG_BIN/pg_ctl" start -D "$data" -l "$work/pg.log" -w -s
net_url="postgres://postgres@$NS_IP:$NET_PG_PORT/postgres?sslmode=disable"
"$CDC_RELAY_DEV_PG_BIN/psql" -X -q "$net_url" -c "CREATE DATABASE cdc"
python3 - "$NS_IP" "$NET_PG_PORT" >"$work/rtt.txt" <<'EOF'
import socket, statistics, sys, time
rtts = []
for _ in range(20):  # a TCP handshake to PostgreSQL is one round trip
    t = time.perf_counter(); socket.create_connection((sys.argv[1], int(sys.argv[2]))).close()
    rtts.append((time.perf_counter() - t) * 1e3)
print(f"TCP connect round trip to PostgreSQL: median {statistics.median(rtts):.2f} ms, min {min(rtts):.2f}, max {max(rtts):.2f}")
EOF
bench hop --pg-url "postgres://postgres@$NS_IP:$NET_PG_PORT/cdc?sslmode=disable" \
	--publishers "run@CDC_RELAY_BACKLOG_PACE=always,run@CDC_RELAY_BACKLOG_PACE=off"
cp "$work/rtt.txt" "$here/hop/rtt.txt"
