package helmchart

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// TestChartOnTheLocalServices runs what the production example renders, as Kubernetes would
// run it, against the local services' secure variant (PostgreSQL verify-full with a password
// role, Kafka SASL_SSL with SCRAM-SHA-512): each pod's exact environment and args, nothing of
// the test's own, with the Secrets "mounted" by copying the local files to a directory per
// volume and pointing the mount paths there. Only the metrics address differs (two pods on one
// host cannot both bind :9188; the probe port is pinned by TestProbesUseTheMetricsPort).
//
// The slot Job creates the slot; pod A streams and is ready, pod B waits as a standby, not
// ready but alive; the upgrade's Job while A streams checks the slot and is a no-op; rows arrive;
// A stopped with SIGTERM (a rollout, a deleted pod) exits 0 within the pod's grace period; B
// takes over, becomes ready and publishes; with the slot dropped, the upgrade's check fails. Needs
// the services (make test starts them).
func TestChartOnTheLocalServices(t *testing.T) {
	s := testenv.SecureEnv(t)
	f := testenv.NewFixture(t)
	ctx := context.Background()
	// As the docs say for a role that does not own the outbox: the owner makes the publication
	// (and the dead-letter table) once, the Job's role creates the slot.
	role := pgx.Identifier{s.PGRole}.Sanitize()
	ddl, err := deadletters.TableDDL(deadletters.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pool.Exec(ctx, ddl); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("create the dead-letter table: %v", err)
	}
	for _, q := range []string{
		"GRANT SELECT ON " + f.Table + " TO " + role,
		"CREATE PUBLICATION " + pgx.Identifier{f.Publication}.Sanitize() + " FOR TABLE " + f.Table + " WITH (publish = 'insert')",
	} {
		if _, err := f.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	pgURL := s.PGURL
	if i := strings.Index(pgURL, "&sslrootcert="); i >= 0 { // the chart adds the mounted CA
		pgURL = pgURL[:i]
	}
	vals := readValues(t, "examples/ha-tls-sasl.yaml", map[string]any{
		"relay": map[string]any{
			"pg-url": pgURL, "brokers": s.Brokers, "slot": f.Slot, "publication": f.Publication,
			"table": f.Table, "dlq-topic": f.DLQ, "kafka-user": s.KafkaUser,
		},
		// The password role authenticates with its password; PostgreSQL 17's failover slots
		// are not what this exercises.
		"secrets": map[string]any{"pgTLS": map[string]any{"certKey": "", "keyKey": ""}},
		"slotJob": map[string]any{"extraFlags": map[string]any{"failover": false}},
	})
	m, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	o := decodeStrict(t, "ha-tls-sasl.yaml on the local services", m)
	secrets := map[string]map[string]string{ // the example's Secrets: name -> key -> local file
		"orders-relay-pg":        {"password": s.PGPasswordFile},
		"orders-relay-pg-tls":    {"ca.crt": s.CA},
		"orders-relay-kafka":     {"password": s.KafkaPassFile},
		"orders-relay-kafka-tls": {"ca.crt": s.CA},
	}
	bin := relay(t)
	job := podEnv(t, o.job.Spec.Template.Spec, secrets, "")

	out, code := runPod(t, bin, job, o.job.Spec.Template.Spec.Containers[0].Args)
	if code != 0 || !strings.Contains(out, "created slot "+f.Slot) {
		t.Fatalf("slot Job: exit %d, want 0 and the slot created\n%s", code, out)
	}

	addrA, addrB := freeAddr(t), freeAddr(t)
	args := o.deployment.Spec.Template.Spec.Containers[0].Args
	a := startPod(t, bin, podEnv(t, o.deployment.Spec.Template.Spec, secrets, addrA), args)
	testenv.Eventually(t, 90*time.Second, "pod A ready (/readyz 200)", func() bool { return status(addrA, "/readyz") == 200 })
	b := startPod(t, bin, podEnv(t, o.deployment.Spec.Template.Spec, secrets, addrB), args)
	testenv.Eventually(t, 60*time.Second, "pod B waiting as a standby", func() bool {
		return strings.Contains(b.output(), "waiting as a standby")
	})
	if r, l := status(addrB, "/readyz"), status(addrB, "/healthz"); r != 503 || l != 200 {
		t.Errorf("standby: /readyz %d, /healthz %d; want 503 (out of the Service, not counted by the budget) and 200 (alive)", r, l)
	}

	// helm upgrade: the Job's init container requires the slot, then slot create is a no-op.
	m, err = renderRelease(t, vals, true)
	if err != nil {
		t.Fatal(err)
	}
	upSpec := decodeStrict(t, "ha-tls-sasl.yaml upgrade on the local services", m).job.Spec.Template.Spec
	if len(upSpec.InitContainers) != 1 {
		t.Fatalf("the upgrade's slot Job has %d init containers, want the slot check", len(upSpec.InitContainers))
	}
	check := podEnv(t, corev1.PodSpec{Volumes: upSpec.Volumes, Containers: upSpec.InitContainers}, secrets, "")
	if out, code := runPod(t, bin, check, upSpec.InitContainers[0].Args); code != 0 {
		t.Errorf("upgrade's slot check while pod A streams: exit %d, want 0\n%s", code, out)
	}
	out, code = runPod(t, bin, podEnv(t, upSpec, secrets, ""), upSpec.Containers[0].Args)
	if code != 0 || !strings.Contains(out, "already exists") || strings.Contains(out, "created slot") {
		t.Errorf("upgrade's slot Job while pod A streams: exit %d, want 0 and a no-op\n%s", code, out)
	}

	c := testenv.Consume(t, f.Topic)
	want := f.Insert(t, false, testenv.Row{Key: "a", Payload: `{"n":1}`}, testenv.Row{Key: "b", Payload: `{"n":2}`})
	c.WaitFor(t, 60*time.Second, "rows published by pod A", hasIDs(want))

	grace := time.Duration(*o.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	start := time.Now()
	if code := a.stop(t, grace); code != 0 {
		t.Errorf("pod A after SIGTERM: exit %d, want 0 within the grace period %s\n%s", code, grace, a.output())
	}
	t.Logf("pod A stopped in %s (grace period %s)", time.Since(start).Round(time.Millisecond), grace)
	testenv.Eventually(t, 60*time.Second, "pod B ready after A let go of the slot", func() bool { return status(addrB, "/readyz") == 200 })
	t.Logf("pod B ready %s after A's SIGTERM", time.Since(start).Round(time.Millisecond))
	want = append(want, f.Insert(t, false, testenv.Row{Key: "a", Payload: `{"n":3}`})...)
	c.WaitFor(t, 60*time.Second, "rows published by pod B", hasIDs(want))
	if code := b.stop(t, grace); code != 0 {
		t.Errorf("pod B after SIGTERM: exit %d, want 0\n%s", code, b.output())
	}
	// The slot gone (dropped, lost, or not on a promoted primary): an upgrade must fail in its
	// check instead of creating a new slot that starts now and skips what the old one had not
	// delivered.
	f.SlotReleased(t, 30*time.Second)
	if _, err := f.Pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, f.Slot); err != nil {
		t.Fatal(err)
	}
	if out, code := runPod(t, bin, check, upSpec.InitContainers[0].Args); code == 0 || !strings.Contains(out, f.Slot) {
		t.Errorf("upgrade's slot check with the slot dropped: exit %d, want a failure naming the slot\n%s", code, out)
	} else {
		t.Logf("upgrade's slot check with the slot dropped: exit %d: %s", code, strings.TrimSpace(out))
	}
	for _, p := range []*pod{a, b} {
		for _, secret := range []string{s.PGPassword, s.KafkaPassword} {
			if strings.Contains(p.output(), secret) {
				t.Errorf("a pod's output shows a password")
			}
		}
	}
}

// podEnv is the container's environment as the kubelet gives it, with each Secret volume's
// mount path pointing at a directory that holds copies of the Secret's files, and, when
// metricsAddr is set, CDC_RELAY_METRICS_ADDR replaced by it.
func podEnv(t *testing.T, spec corev1.PodSpec, secrets map[string]map[string]string, metricsAddr string) []string {
	t.Helper()
	root := t.TempDir()
	dirs := map[string]string{} // volume -> local directory
	for _, v := range spec.Volumes {
		if v.Secret == nil {
			continue
		}
		keys, ok := secrets[v.Secret.SecretName]
		if !ok {
			t.Fatalf("volume %s: no Secret %s in the test", v.Name, v.Secret.SecretName)
		}
		dir := filepath.Join(root, v.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for key, src := range keys {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, key), b, 0o400); err != nil {
				t.Fatal(err)
			}
		}
		dirs[v.Name] = dir
	}
	c := spec.Containers[0]
	env := []string{"HOME=" + root, "PATH=/usr/bin:/bin"}
	for _, e := range c.Env {
		val := e.Value
		for _, m := range c.VolumeMounts {
			if d, ok := dirs[m.Name]; ok {
				val = strings.ReplaceAll(val, m.MountPath+"/", d+"/")
			}
		}
		if e.Name == "CDC_RELAY_METRICS_ADDR" && metricsAddr != "" {
			val = metricsAddr
		}
		env = append(env, e.Name+"="+val)
	}
	return env
}

// pod is one container process with exactly its environment.
type pod struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func (p *pod) Write(b []byte) (int, error) { p.mu.Lock(); defer p.mu.Unlock(); return p.out.Write(b) }
func (p *pod) output() string              { p.mu.Lock(); defer p.mu.Unlock(); return p.out.String() }

func startPod(t *testing.T, bin string, env, args []string) *pod {
	t.Helper()
	p := &pod{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = env, p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("cdc-relay %s output:\n%s", strings.Join(args, " "), p.output())
		}
	})
	return p
}

// stop sends SIGTERM, as the kubelet does, and waits up to grace; then SIGKILL (and the test fails).
func (p *pod) stop(t *testing.T, grace time.Duration) int {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("no exit within the grace period %s: the kubelet would SIGKILL it", grace)
	}
	return p.cmd.ProcessState.ExitCode()
}

// runPod runs a container to completion (the Job), within its activeDeadlineSeconds' spirit.
func runPod(t *testing.T, bin string, env, args []string) (string, int) {
	t.Helper()
	p := startPod(t, bin, env, args)
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("cdc-relay %s did not finish in 2 minutes:\n%s", strings.Join(args, " "), p.output())
	}
	return p.output(), p.cmd.ProcessState.ExitCode()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// status is the HTTP status of GET path on addr, 0 when it does not answer.
func status(addr, path string) int {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// hasIDs holds when every outbox id in want has arrived (the contract's outbox-id header).
func hasIDs(want []int64) func([]*kgo.Record) bool {
	return func(recs []*kgo.Record) bool {
		got := map[string]bool{}
		for _, r := range recs {
			got[testenv.Header(r, "outbox-id")] = true
		}
		for _, id := range want {
			if !got[strconv.FormatInt(id, 10)] {
				return false
			}
		}
		return true
	}
}
