# cdc-relay image: a static binary on distroless. Build: docker build -t cdc-relay .
# Runs `cdc-relay run`; configure it with CDC_RELAY_PG_URL, CDC_RELAY_BROKERS, CDC_RELAY_SLOT,
# CDC_RELAY_PUBLICATION (see docker-compose.yml).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/cdc-relay ./cmd/cdc-relay

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/cdc-relay /usr/local/bin/cdc-relay
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/cdc-relay"]
CMD ["run"]
