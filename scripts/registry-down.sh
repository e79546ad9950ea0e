#!/usr/bin/env bash
# Stop the local schema registry started by scripts/registry-up.sh.
#   scripts/registry-down.sh          # stop it, keep its data (.dev/registry/data)
#   scripts/registry-down.sh --wipe   # stop it and delete .dev/registry (data, log, the unpacked application)
set -euo pipefail
for _lib in common tls registry; do
	# shellcheck source=/dev/null
	source "$(dirname "${BASH_SOURCE[0]}")/lib/$_lib.sh"
done
wipe=0
for a in "$@"; do
	case "$a" in
	--wipe) wipe=1 ;;
	*) die "usage: $0 [--wipe]" ;;
	esac
done

[[ -d "$REGISTRY_HOME" ]] || { log "nothing to stop ($REGISTRY_HOME does not exist)"; exit 0; }
dev_lock
registry_stop TERM
if ((wipe)); then
	log "deleting $REGISTRY_HOME"
	rm -rf "$REGISTRY_HOME"
fi
