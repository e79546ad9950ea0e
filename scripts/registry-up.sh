#!/usr/bin/env bash
# Start the local schema registry (Apicurio Registry 2.6, Confluent-compatible API) used by the schema
# tests, unless it is already running, and wait until its API answers.
#
#   eval "$(scripts/registry-up.sh)"   # stdout is only export lines, progress is on stderr
#
# Data (H2 file), log and pid live in .dev/registry/ at the repo root; the application is fetched with
# Maven (~/.m2) on the first run. Env: CDC_RELAY_DEV_REGISTRY_PORT (18081; HTTPS with the dev CA's
# certificate on port+1, or CDC_RELAY_DEV_REGISTRY_TLS_PORT), CDC_RELAY_DEV_TIMEOUT (120 s).
set -euo pipefail
for _lib in common tls registry; do
	# shellcheck source=/dev/null
	source "$(dirname "${BASH_SOURCE[0]}")/lib/$_lib.sh"
done
(($# == 0)) || die "usage: $0 (no arguments)"

dev_lock
start=$SECONDS
registry_up
log "up in $((SECONDS - start))s: $REGISTRY_URL"
print_registry_exports
