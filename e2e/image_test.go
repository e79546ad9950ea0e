package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/build"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// podman runs `podman args...` with a timeout and returns its combined output and exit code.
func podman(t *testing.T, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("podman %s: timed out after %s\n%s", strings.Join(args, " "), timeout, out.String())
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		code = ee.ExitCode()
	}
	return out.String(), code
}

// The release image, built and run for real: scripts/image.sh (what `make image` runs)
// builds it with podman, installing podman and runc on a fresh machine; `--help` works in it;
// `run` in it (host network, the fixture's slot) publishes a row with the contract headers; and
// SIGTERM through `podman stop` ends it with exit code 0. A machine where podman cannot work fails
// this test: the image is part of what a green run promises.
func TestImageBuildsAndRuns(t *testing.T) {
	t.Parallel()
	// Before the build: the image runs against the services, and `make unit` (go test ./...
	// without them) must not build it beside make test's own build (two podman builds at once
	// failed with "container not known").
	testenv.Require(t, "PostgreSQL and Kafka", "CDC_RELAY_PG_URL", "CDC_RELAY_BROKERS")
	root, err := build.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Name(t)
	image := "cdc-relay:e2e-" + name

	// Up to 10 minutes: on a fresh machine this includes apt-get update and install (about 15 s here).
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	script := exec.CommandContext(ctx, filepath.Join(root, "scripts", "image.sh"))
	script.Dir = root
	script.Env = append(os.Environ(), "CDC_RELAY_IMAGE="+image, "CDC_RELAY_ENGINE=podman",
		"CDC_RELAY_IMAGE_CONTEXT="+t.TempDir())
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh could not build the image with podman (is podman usable on this machine? "+
			"it needs apt-get and root to install podman+runc, and a working runc): %v\n%s", err, out)
	} else {
		t.Logf("image built in %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	}
	t.Cleanup(func() { podman(t, time.Minute, "rmi", "-f", image) })

	// --help: exit 0 and the usage.
	out, code := podman(t, time.Minute, "run", "--rm", "--network", "host", image, "--help")
	if code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, "cdc-relay run") {
		t.Fatalf("podman run %s --help: exit %d, want 0 and the usage\n%s", image, code, out)
	}
	// The image's contract: non-root user, entrypoint cdc-relay, default command run.
	out, code = podman(t, time.Minute, "image", "inspect", "--format", "{{.Config.User}}|{{.Config.Entrypoint}}|{{.Config.Cmd}}", image)
	if code != 0 || strings.TrimSpace(out) != "nonroot:nonroot|[/usr/local/bin/cdc-relay]|[run]" {
		t.Fatalf("image config: exit %d: %q, want nonroot:nonroot|[/usr/local/bin/cdc-relay]|[run]", code, out)
	}

	// docker-compose.yml runs this image (cdc-relay:local, scripts/image.sh's default tag, never
	// built or pulled by compose) and configures it only with environment names the image's
	// cdc-relay knows (every one listed in its `run --help`).
	compose, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(compose, []byte("\n    build:")) || bytes.Count(compose, []byte("image: cdc-relay:local\n    pull_policy: never")) != 4 {
		t.Errorf("docker-compose.yml: want its 4 relay services on image cdc-relay:local with pull_policy never and no build:")
	}
	runHelp, code := podman(t, time.Minute, "run", "--rm", image, "run", "--help")
	if code != 0 {
		t.Fatalf("run --help in the image: exit %d\n%s", code, runHelp)
	}
	for _, sm := range regexp.MustCompile(`(?m)^\s+(CDC_RELAY_[A-Z_]+):`).FindAllStringSubmatch(string(compose), -1) {
		if m := sm[1]; !strings.Contains(runHelp, "["+m+"]") {
			t.Errorf("docker-compose.yml sets %s, which the image's cdc-relay run does not read", m)
		}
	}

	// run, against the local services with the host's network, on the test's own slot and topic.
	e := testenv.NewRelayEnv(t, false)
	f := e.F
	container := "cdc-relay-e2e-" + name
	t.Cleanup(func() { podman(t, time.Minute, "rm", "-f", "-t", "0", container) })
	args := []string{"run", "-d", "--name", container, "--network", "host",
		"-e", "CDC_RELAY_PG_URL=" + testenv.PGURL(t), "-e", "CDC_RELAY_BROKERS=" + strings.Join(testenv.Brokers(t), ",")}
	for _, kv := range e.Env { // CDC_RELAY_SLOT and CDC_RELAY_PUBLICATION
		args = append(args, "-e", kv)
	}
	// The image's default command is run; its flags need it named.
	args = append(args, image, "run", "--dlq-topic", f.DLQ, "--metrics-addr", "127.0.0.1:0", "--status-interval", "1s")
	if out, code := podman(t, time.Minute, args...); code != 0 {
		t.Fatalf("podman run -d: exit %d\n%s", code, out)
	}
	logs := func() string { out, _ := podman(t, time.Minute, "logs", container); return out }

	cons := testenv.Consume(t, f.Topic)
	id := f.Insert(t, false, testenv.Row{Key: "order-7", Payload: `{"n": 7}`, EventType: "OrderPlaced"})[0]
	var recs []*kgo.Record
	func() {
		defer func() {
			if t.Failed() {
				t.Logf("container logs:\n%s", logs())
			}
		}()
		recs = cons.WaitFor(t, 60*time.Second, "the row published by the container", func(r []*kgo.Record) bool { return len(r) >= 1 })
	}()
	r := recs[0]
	want := map[string]string{
		"outbox-id": strconv.FormatInt(id, 10), "outbox-table": f.Table, "aggregate-id": "order-7", "event-type": "OrderPlaced",
	}
	for k, v := range want {
		if got := testenv.Header(r, k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if string(r.Key) != "order-7" || string(r.Value) != `{"n": 7}` {
		t.Errorf("record key %q value %q, want order-7 and the payload", r.Key, r.Value)
	}
	lsnOf(t, r)
	if ts := testenv.Header(r, "cdc-commit-time"); ts == "" {
		t.Errorf("no cdc-commit-time header: %v", r.Headers)
	} else if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Errorf("cdc-commit-time %q: %v", ts, err)
	}

	// SIGTERM (podman stop sends the image's stop signal, SIGTERM, and waits up to 30 s): exit 0.
	stopStart := time.Now()
	if out, code := podman(t, time.Minute, "stop", "-t", "30", container); code != 0 {
		t.Fatalf("podman stop: exit %d\n%s", code, out)
	}
	stopped := time.Since(stopStart)
	out, code = podman(t, time.Minute, "inspect", "--format", "{{.State.ExitCode}}", container)
	if code != 0 {
		t.Fatalf("podman inspect: exit %d\n%s", code, out)
	}
	if strings.TrimSpace(out) != "0" {
		t.Fatalf("the container exited with %s after SIGTERM, want 0\n%s", strings.TrimSpace(out), logs())
	}
	if stopped >= 30*time.Second {
		t.Fatalf("podman stop took %s: SIGTERM did not end the relay, podman killed it", stopped)
	}
	t.Logf("stopped by SIGTERM in %s with exit code 0", stopped.Round(time.Millisecond))
	f.SlotReleased(t, 20*time.Second)
}
