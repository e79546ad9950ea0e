# The cdc-relay release image, for podman and Docker alike: FROM scratch, so it builds without any
# image registry. The build context is not the repository but bin/image/, which `make image`
# (scripts/image.sh) fills first with the static binary (CGO_ENABLED=0 go build -trimpath), the host's
# CA bundle and passwd/group files naming the non-root user nonroot (uid/gid 65532):
#   make image                                   # = scripts/image.sh: podman build -f Dockerfile bin/image
#   CDC_RELAY_ENGINE=docker make image           # the same with Docker
# Runs `cdc-relay run` as nonroot; configure it with CDC_RELAY_PG_URL, CDC_RELAY_BROKERS,
# CDC_RELAY_SLOT, CDC_RELAY_PUBLICATION (see docker-compose.yml, docs/operations.md, "Container image").

FROM scratch
COPY passwd group /etc/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY cdc-relay /usr/local/bin/cdc-relay
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/cdc-relay"]
CMD ["run"]
