// Package helmchart tests the Helm chart deploy/helm/cdc-relay without a cluster: helm lint and
// helm template through Helm's Go SDK, every rendered manifest decoded strictly into the
// Kubernetes API types (unknown fields refused), and checks that tie the chart to the binary it
// runs: the environment twins it sets are ones `cdc-relay run --help` (and `slot create --help`)
// list, the probes use the metrics port the relay binds, the image is the one `make image`
// builds, the pod runs as the image's user, and the rules and dashboard it ships equal deploy/'s.
//
// It builds the relay from this checkout (go build), so it runs in the tools module, which keeps
// Helm's and Kubernetes' dependencies out of the relay's go.mod. It needs no services.
package helmchart
