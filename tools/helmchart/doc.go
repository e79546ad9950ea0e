// Package helmchart tests the Helm chart deploy/helm/cdc-relay without a cluster: helm lint and
// helm template through Helm's Go SDK, every rendered manifest decoded strictly into the
// Kubernetes API types (unknown fields refused), and checks that tie the chart to the binary it
// runs: the environment twins it sets are ones `cdc-relay run --help` (and `slot create --help`)
// list, the probes use the metrics port the relay binds, the image is the one `make image`
// builds, the pod runs as the image's user, and the rules and dashboard it ships equal deploy/'s.
//
// # On the local services
//
// TestChartOnTheLocalServices then runs what the production example renders, each pod with
// exactly its rendered environment and its Secrets' files, against the local services' secure
// variant: the slot Job, an active pod and a standby, the Job again while the active streams,
// a SIGTERM and the standby's takeover. It needs the services (make test starts them; like every
// integration test here it fails without them); the other tests need none.
//
// It builds the relay from this checkout (go build), so it runs in the tools module, which keeps
// Helm's and Kubernetes' dependencies out of the relay's go.mod.
package helmchart
