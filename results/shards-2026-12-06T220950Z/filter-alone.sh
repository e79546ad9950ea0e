#!/usr/bin/env bash
# Run by hand beside `cdc-bench shards` (one run, indicative): what one walsender costs, alone on the
# machine, when a 1-in-4 row filter (a shard of 4) passes a quarter of the rows, against no filter and
# a filter that passes none. Usage: scripts/dev-up.sh first; N=100000 bash filter-alone.sh
# Walsender cost of a 1-in-4 row filter, alone: pg_recvlogical drains the same backlog through
# the plain publication, a shard's (1/4 of the rows pass) and one no row passes.
set -euo pipefail
U=postgres://postgres@127.0.0.1:15432/cdc
B=/usr/lib/postgresql/15/bin
N=${N:-100000}
P() { psql "$U" -v ON_ERROR_STOP=1 -qAt "$@"; }
for s in sx_plain sx_q sx_none; do P -c "SELECT pg_drop_replication_slot('$s') FROM pg_replication_slots WHERE slot_name='$s'" >/dev/null; done
P <<SQL
DROP PUBLICATION IF EXISTS sx_plain; DROP PUBLICATION IF EXISTS sx_q; DROP PUBLICATION IF EXISTS sx_none;
DROP TABLE IF EXISTS sx_outbox;
CREATE TABLE sx_outbox (id bigserial PRIMARY KEY, aggregate_id text NOT NULL, topic text NOT NULL, event_type text, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE PUBLICATION sx_plain FOR TABLE sx_outbox WITH (publish = 'insert');
CREATE PUBLICATION sx_q FOR TABLE sx_outbox WHERE (((hashtext(aggregate_id::text) & 2147483647) % 4) = 0) WITH (publish = 'insert');
CREATE PUBLICATION sx_none FOR TABLE sx_outbox WHERE (aggregate_id = 'nope') WITH (publish = 'insert');
SQL
for s in sx_plain sx_q sx_none; do P -c "SELECT 1 FROM pg_create_logical_replication_slot('$s', 'pgoutput')" >/dev/null; done
P <<SQL
SET synchronous_commit = off;
DO \$\$ BEGIN FOR i IN 1..$N LOOP
  INSERT INTO sx_outbox (aggregate_id, topic, event_type, payload) VALUES ('order-' || i, 'orders', 'created', jsonb_build_object('id', i, 'amount', i * 3, 'note', 'a payload of some size'));
  COMMIT;
END LOOP; END \$\$;
SQL
END=$(P -c "SELECT pg_current_wal_insert_lsn()")
round=1
for s in sx_plain sx_q sx_none; do
  pub=${s}
  start=$(date +%s.%N)
  "$B/pg_recvlogical" -d "$U" -S "$s" --start --endpos "$END" -o proto_version=1 -o publication_names=$pub -f /dev/null --no-loop &
  rp=$!
  wpid=""
  for _ in $(seq 100); do wpid=$(P -c "SELECT active_pid FROM pg_replication_slots WHERE slot_name='$s' AND active"); [[ -n "$wpid" ]] && break; sleep 0.02; done
  cpu=0
  while kill -0 $rp 2>/dev/null; do
    if [[ -n "$wpid" && -r /proc/$wpid/stat ]]; then c=$(awk '{print $14+$15}' /proc/$wpid/stat 2>/dev/null || echo $cpu); cpu=${c:-$cpu}; fi
    sleep 0.05
  done
  wait $rp || true
  el=$(echo "$(date +%s.%N) - $start" | bc)
  echo "round $round $s: wall ${el}s walsender CPU ~$(echo "scale=2; $cpu/100" | bc)s (last sample) per 10k rows: $(echo "scale=4; $cpu/100/($N/10000)" | bc)"
done
for s in sx_plain sx_q sx_none; do P -c "SELECT pg_drop_replication_slot('$s')" >/dev/null; done
P -c "DROP PUBLICATION sx_plain; DROP PUBLICATION sx_q; DROP PUBLICATION sx_none; DROP TABLE sx_outbox" >/dev/null
