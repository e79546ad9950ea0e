#!/usr/bin/env bash
# The release image, built without any image registry: the static binary is compiled here with the
# host's Go (CGO_ENABLED=0, -trimpath), then the Dockerfile (FROM scratch) copies it, the CA bundle and
# an /etc/passwd with the non-root user nonroot (uid 65532) into an image. Used by `make image` and by
# the test e2e/image_test.go.
#
#   scripts/image.sh                       # build cdc-relay:local with podman (installed if missing)
#   CDC_RELAY_ENGINE=docker scripts/image.sh   # the same image with Docker
#
# Env: CDC_RELAY_IMAGE (tag, cdc-relay:local), CDC_RELAY_ENGINE (podman or docker; podman by default),
# CDC_RELAY_IMAGE_CONTEXT (the build context it fills, bin/image). Progress goes to stderr; the last
# line on stdout is the image's tag.
#
# Podman on Debian: when podman or runc is missing and we are root, `apt-get update` and
# `apt-get install podman runc` run first; then, as root, /etc/containers/containers.conf.d/cdc-relay.conf
# selects runc with no default ulimits (crun, podman's default, fails on these machines on setrlimit
# and hybrid cgroups). A machine where podman cannot work makes this script fail, never skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

IMAGE="${CDC_RELAY_IMAGE:-cdc-relay:local}"
ENGINE="${CDC_RELAY_ENGINE:-podman}"
CTX="${CDC_RELAY_IMAGE_CONTEXT:-bin/image}"
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
CONF_DROPIN=/etc/containers/containers.conf.d/cdc-relay.conf

log() { printf '[image] %s\n' "$*" >&2; }
die() { printf '[image] ERROR: %s\n' "$*" >&2; exit 1; }

install_podman() {
	[[ "$(id -u)" == 0 ]] || die "podman/runc missing and not root: install them (Debian: apt-get install podman runc)"
	command -v apt-get >/dev/null || die "podman/runc missing and no apt-get: install podman and runc"
	log "installing podman and runc with apt-get"
	local t=$SECONDS
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q -o DPkg::Lock::Timeout=300 >&2
	# runc named explicitly: podman depends on crun | runc and apt would pick crun.
	apt-get install -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends podman runc >&2 || die "apt-get install podman runc failed"
	log "podman and runc installed in $((SECONDS - t))s"
}

configure_podman() {
	command -v podman >/dev/null && command -v runc >/dev/null || install_podman
	if [[ "$(id -u)" == 0 && ! -f "$CONF_DROPIN" ]]; then
		mkdir -p "$(dirname "$CONF_DROPIN")"
		printf '# Written by cdc-relay scripts/image.sh: crun fails here on setrlimit and hybrid cgroups.\n[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' >"$CONF_DROPIN"
		log "wrote $CONF_DROPIN (runtime runc, no default ulimits)"
	fi
}

case "$ENGINE" in
podman) configure_podman ;;
docker) command -v docker >/dev/null || die "docker not found (CDC_RELAY_ENGINE=docker)" ;;
*) die "CDC_RELAY_ENGINE must be podman or docker, not $ENGINE" ;;
esac
[[ -r "$CA_BUNDLE" ]] || die "$CA_BUNDLE missing (Debian: apt-get install ca-certificates)"

start=$SECONDS
mkdir -p "$CTX"
log "building the static binary into $CTX/cdc-relay"
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$CTX/cdc-relay" ./cmd/cdc-relay
cp "$CA_BUNDLE" "$CTX/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$CTX/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$CTX/group"

log "$ENGINE build -t $IMAGE -f Dockerfile $CTX"
"$ENGINE" build -q -t "$IMAGE" -f Dockerfile "$CTX" >&2 || die "$ENGINE build failed"
size=$("$ENGINE" image inspect --format '{{.Size}}' "$IMAGE")
log "built $IMAGE in $((SECONDS - start))s: $((size / 1024 / 1024)) MiB ($size bytes)"
echo "$IMAGE"
