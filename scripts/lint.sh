#!/usr/bin/env bash
# golangci-lint (.golangci.yml) on both modules, the relay (.) and its tools (tools/), with the
# version that tools/go.mod pins (its `tool` directive), so every machine runs the same checks.
# Exit 1 with the findings listed when there are any.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .dev/bin
# Built once into the build cache; later builds only link.
go build -C tools -o ../.dev/bin/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint
.dev/bin/golangci-lint run ./...
(cd tools && ../.dev/bin/golangci-lint run -c ../.golangci.yml ./...)
