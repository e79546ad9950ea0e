package helmchart

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// imageScript is what `make image` runs; its defaults are the image's tag and user.
const imageScript = repoRoot + "/scripts/image.sh"

// TestTheBinaryAcceptsTheRenderedValues runs `cdc-relay run`, `slot create` and the upgrade's
// `slot status` with each container's rendered environment: every value must parse as its flag's type (a YAML number
// that the chart printed as 2.147483648e+09 would not). A bad --log-format on the command line
// makes the command stop at validation (exit 2) before it connects anywhere, so the only
// errors that may name an environment twin are none.
func TestTheBinaryAcceptsTheRenderedValues(t *testing.T) {
	for _, file := range cases {
		o, up := renderCase(t, file), renderUpgrade(t, file)
		for _, c := range []struct {
			what string
			env  []corev1.EnvVar
			args []string
		}{
			{"relay", o.deployment.Spec.Template.Spec.Containers[0].Env, []string{"run"}},
			{"slot Job", o.job.Spec.Template.Spec.Containers[0].Env, []string{"slot", "create"}},
			{"upgrade's slot check", up.job.Spec.Template.Spec.InitContainers[0].Env, []string{"slot", "status"}},
		} {
			cmd := exec.Command(relay(t), append(c.args, "--log-format", "not-a-format")...)
			cmd.Env = []string{"HOME=" + t.TempDir()}
			for _, e := range c.env {
				cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
			}
			var stderr bytes.Buffer
			cmd.Stderr, cmd.Stdout = &stderr, &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("%s: %s: cdc-relay %s did not stop at validation within 60 s\n%s", file, c.what, strings.Join(c.args, " "), stderr.String())
			}
			if strings.Contains(stderr.String(), "environment CDC_RELAY_") {
				t.Errorf("%s: %s: cdc-relay %s refuses a rendered value:\n%s", file, c.what, strings.Join(c.args, " "), stderr.String())
				continue
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "--log-format") {
				t.Fatalf("%s: %s: want exit 2 naming --log-format, got %v\n%s", file, c.what, err, stderr.String())
			}
		}
	}
}

// TestProbesUseTheMetricsPort: liveness on /healthz and readiness on /readyz, both on the
// container port the relay binds (CDC_RELAY_METRICS_ADDR, on every interface: the kubelet
// probes the pod's IP, and run's default 127.0.0.1:9188 would refuse it).
func TestProbesUseTheMetricsPort(t *testing.T) {
	for _, file := range cases {
		o := renderCase(t, file)
		c := o.deployment.Spec.Template.Spec.Containers[0]
		host, port, err := net.SplitHostPort(envOf(c)["CDC_RELAY_METRICS_ADDR"])
		if err != nil || (host != "" && host != "0.0.0.0") {
			t.Fatalf("%s: CDC_RELAY_METRICS_ADDR %q: want :PORT (every interface)", file, envOf(c)["CDC_RELAY_METRICS_ADDR"])
		}
		byName := map[string]int32{}
		for _, p := range c.Ports {
			byName[p.Name] = p.ContainerPort
		}
		for _, pr := range []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
			if pr.probe == nil || pr.probe.HTTPGet == nil {
				t.Errorf("%s: no HTTP %s probe", file, pr.name)
				continue
			}
			g := pr.probe.HTTPGet
			n := g.Port.IntVal
			if g.Port.StrVal != "" {
				n = byName[g.Port.StrVal]
			}
			if g.Path != pr.path || port == "" || n == 0 || port != itoa(n) {
				t.Errorf("%s: %s probe %s on port %s (%d), want %s on the metrics port %s", file, pr.name, g.Path, g.Port.String(), n, pr.path, port)
			}
		}
		// /readyz waits up to 3 s for a Kafka round trip (metrics.readyTimeout).
		if c.ReadinessProbe.TimeoutSeconds <= 3 {
			t.Errorf("%s: readiness timeout %d s: /readyz may take 3 s", file, c.ReadinessProbe.TimeoutSeconds)
		}
		if o.service != nil && (o.service.Spec.Ports[0].TargetPort.StrVal != "metrics" && o.service.Spec.Ports[0].TargetPort.String() != port) {
			t.Errorf("%s: the Service targets %s, not the metrics port", file, o.service.Spec.Ports[0].TargetPort.String())
		}
	}
}

func itoa(n int32) string { b, _ := json.Marshal(n); return string(b) }

// TestImageIsWhatMakeImageBuilds: with the chart's defaults the pods run the tag scripts/image.sh
// builds, and the example's image is the one it names.
func TestImageIsWhatMakeImageBuilds(t *testing.T) {
	script, err := os.ReadFile(imageScript)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGE="\$\{CDC_RELAY_IMAGE:-([^}]+)\}"$`).FindSubmatch(script)
	if m == nil {
		t.Fatalf("%s: no IMAGE=\"${CDC_RELAY_IMAGE:-...}\" line: the test reads the default tag from it", imageScript)
	}
	want := map[string]string{
		"examples/minimal.yaml":     string(m[1]),
		"examples/ha-tls-sasl.yaml": "registry.example.com/platform/cdc-relay:2026.12.1",
	}
	for _, file := range cases {
		o := renderCase(t, file)
		for what, img := range map[string]string{
			"relay":    o.deployment.Spec.Template.Spec.Containers[0].Image,
			"slot Job": o.job.Spec.Template.Spec.Containers[0].Image,
		} {
			if img != want[file] {
				t.Errorf("%s: %s image %q, want %q", file, what, img, want[file])
			}
		}
	}
}

// TestPodsRunAsTheImagesUser: the relay and the slot Job run as the image's nonroot user (the
// uid in the passwd file scripts/image.sh writes), on a read-only root filesystem, with no
// privilege escalation and no capabilities.
func TestPodsRunAsTheImagesUser(t *testing.T) {
	script, err := os.ReadFile(imageScript)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`nonroot:x:(\d+):(\d+):`).FindSubmatch(script)
	if m == nil {
		t.Fatalf("%s: no nonroot passwd line", imageScript)
	}
	uid := string(m[1])
	for _, file := range cases {
		o, up := renderCase(t, file), renderUpgrade(t, file)
		for what, spec := range map[string]corev1.PodSpec{"relay": o.deployment.Spec.Template.Spec, "slot Job": o.job.Spec.Template.Spec,
			"upgrade's slot Job": up.job.Spec.Template.Spec} {
			ps := spec.SecurityContext
			if ps == nil || ps.RunAsUser == nil || itoa64(*ps.RunAsUser) != uid || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot ||
				ps.FSGroup == nil || itoa64(*ps.FSGroup) != string(m[2]) {
				t.Errorf("%s: %s pod security context %+v: want runAsNonRoot, runAsUser %s, fsGroup %s (the secret files' group)", file, what, ps, uid, m[2])
			}
			if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
				t.Errorf("%s: %s mounts a service account token; the relay does not use the API", file, what)
			}
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				sc := c.SecurityContext
				if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
					sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
					sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 ||
					(sc.RunAsUser != nil && itoa64(*sc.RunAsUser) != uid) || (sc.Privileged != nil && *sc.Privileged) {
					t.Errorf("%s: %s container %s security context %+v: want a read-only root, no privilege escalation, capabilities drop [ALL]", file, what, c.Name, sc)
				}
			}
		}
	}
}

func itoa64(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestGracePeriodOutlastsShutdownTimeout: the kubelet's SIGKILL comes after the relay's flush
// deadline, with time left for the final status and the end of the COPY.
func TestGracePeriodOutlastsShutdownTimeout(t *testing.T) {
	for _, file := range cases {
		o := renderCase(t, file)
		spec := o.deployment.Spec.Template.Spec
		d, err := time.ParseDuration(envOf(spec.Containers[0])["CDC_RELAY_SHUTDOWN_TIMEOUT"])
		if err != nil {
			t.Fatalf("%s: CDC_RELAY_SHUTDOWN_TIMEOUT: %v", file, err)
		}
		if spec.TerminationGracePeriodSeconds == nil || time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second < d+5*time.Second {
			t.Errorf("%s: terminationGracePeriodSeconds %d, want at least --shutdown-timeout %s + 5 s", file, ptrOr0(spec.TerminationGracePeriodSeconds), d)
		}
	}
}

// TestActiveStandbyPair: two replicas on different nodes; a budget that keeps the streaming one
// and lets the unready standby be evicted; a rollout that does not wait for a new pod to be
// Ready (a new pod is a standby until the old active lets go); a metrics Service that keeps the
// standby in its endpoints; a ServiceMonitor that selects that Service's port.
func TestActiveStandbyPair(t *testing.T) {
	for _, file := range cases {
		o := renderCase(t, file)
		d := o.deployment
		pods := labels.Set(d.Spec.Template.Labels)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("%s: replicas %v, want 2", file, d.Spec.Replicas)
		}
		ru := d.Spec.Strategy.RollingUpdate
		if d.Spec.Strategy.Type != "RollingUpdate" || ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != "100%" ||
			ru.MaxSurge == nil || ru.MaxSurge.String() != "1" {
			t.Errorf("%s: strategy %+v: want RollingUpdate, maxSurge 1, maxUnavailable 100%% (a rollout that waits for a Ready new pod never ends)", file, d.Spec.Strategy)
		}
		aff := d.Spec.Template.Spec.Affinity
		var terms []corev1.PodAffinityTerm
		if aff != nil && aff.PodAntiAffinity != nil {
			terms = append(terms, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
			for _, w := range aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				terms = append(terms, w.PodAffinityTerm)
			}
		}
		if len(terms) != 1 || terms[0].TopologyKey != "kubernetes.io/hostname" || !selects(t, terms[0].LabelSelector.MatchLabels, pods) {
			t.Errorf("%s: pod anti-affinity %+v: want one term on kubernetes.io/hostname that selects the relay's pods", file, terms)
		}
		if o.pdb == nil {
			t.Fatalf("%s: no PodDisruptionBudget", file)
		}
		if o.pdb.Spec.MinAvailable == nil || o.pdb.Spec.MinAvailable.String() != "1" || o.pdb.Spec.MaxUnavailable != nil ||
			o.pdb.Spec.UnhealthyPodEvictionPolicy == nil || *o.pdb.Spec.UnhealthyPodEvictionPolicy != "AlwaysAllow" ||
			!selects(t, o.pdb.Spec.Selector.MatchLabels, pods) {
			t.Errorf("%s: PodDisruptionBudget %+v: want minAvailable 1, unhealthyPodEvictionPolicy AlwaysAllow, selecting the relay's pods", file, o.pdb.Spec)
		}
		s := o.service
		if s == nil || s.Spec.ClusterIP != "None" || !s.Spec.PublishNotReadyAddresses || !selects(t, s.Spec.Selector, pods) {
			t.Errorf("%s: metrics Service %+v: want headless, publishNotReadyAddresses, selecting the relay's pods", file, s)
		}
		if sm := o.serviceMonitor; sm != nil {
			if s == nil || !selects(t, sm.Spec.Selector.MatchLabels, labels.Set(s.Labels)) || len(sm.Spec.Endpoints) != 1 ||
				sm.Spec.Endpoints[0].Port != s.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
				t.Errorf("%s: ServiceMonitor %+v does not scrape the metrics Service's port", file, sm.Spec)
			}
		}
		if labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(o.job.Spec.Template.Labels)) {
			t.Errorf("%s: the slot Job's pods carry the Deployment's selector labels (the PDB and the Service would count them)", file)
		}
	}
}

func selects(t *testing.T, sel map[string]string, set labels.Set) bool {
	t.Helper()
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(set)
}

// TestSecretsAreMountedFiles: every file the relay is told to read (the *_FILE twins and
// pg-url's sslrootcert, sslcert and sslkey) lies in a read-only mount of a Secret volume, and
// a password never appears in values or the environment (checkEnv refuses valueFrom and
// *PASSWORD variables; decodeStrict refuses a rendered Secret).
func TestSecretsAreMountedFiles(t *testing.T) {
	sslParam := regexp.MustCompile(`(?:^|[?&])(sslrootcert|sslcert|sslkey)=([^&]+)`)
	for _, file := range cases {
		o, up := renderCase(t, file), renderUpgrade(t, file)
		for what, spec := range map[string]corev1.PodSpec{"relay": o.deployment.Spec.Template.Spec, "slot Job": o.job.Spec.Template.Spec,
			"upgrade's slot check": {Volumes: up.job.Spec.Template.Spec.Volumes, Containers: up.job.Spec.Template.Spec.InitContainers}} {
			c := spec.Containers[0]
			secretVols := map[string]bool{}
			for _, v := range spec.Volumes {
				if v.Secret != nil {
					secretVols[v.Name] = true
					if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
						t.Errorf("%s: %s: secret volume %s mode %v: want no access for others", file, what, v.Name, v.Secret.DefaultMode)
					}
				}
			}
			inSecret := func(path string) bool {
				for _, m := range c.VolumeMounts {
					if secretVols[m.Name] && m.ReadOnly && strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
						return true
					}
				}
				return false
			}
			var paths []string
			for name, v := range envOf(c) {
				if strings.HasSuffix(name, "_FILE") {
					paths = append(paths, v)
				}
			}
			for _, m := range sslParam.FindAllStringSubmatch(envOf(c)["CDC_RELAY_PG_URL"], -1) {
				paths = append(paths, m[2])
			}
			for _, p := range paths {
				if !inSecret(p) {
					t.Errorf("%s: %s reads %s, which is not in a read-only Secret mount", file, what, p)
				}
			}
			if file == "examples/ha-tls-sasl.yaml" {
				// relay: both password files, Kafka's CA and PostgreSQL's CA, certificate and key;
				// the Job: PostgreSQL's only.
				if n := map[string]int{"relay": 6, "slot Job": 4, "upgrade's slot check": 4}[what]; len(paths) != n {
					t.Errorf("%s: %s reads %d secret files %v, want %d", file, what, len(paths), paths, n)
				}
			}
		}
	}
}

// TestResourcesCoverMeasuredRSS: the memory request is above run's highest peak RSS in the
// benchmark's latest results (results/latest/report.json), and the limit above the 200 MB that
// e2e/bigtx_test.go holds a 1,000,000-row transaction to.
func TestResourcesCoverMeasuredRSS(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "results", "latest", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var report map[string]json.RawMessage
	if err := json.Unmarshal(b, &report); err != nil {
		t.Fatal(err)
	}
	var peak int64
	for _, phase := range []string{"steady", "backlog", "replay"} {
		var rows []struct {
			Publisher string `json:"publisher"`
			PeakRSS   int64  `json:"peak_rss_bytes"`
		}
		if report[phase] == nil {
			continue // a run of some phases only
		}
		if err := json.Unmarshal(report[phase], &rows); err != nil {
			t.Fatalf("results/latest/report.json %s: %v", phase, err)
		}
		for _, r := range rows {
			if r.Publisher == "run" && r.PeakRSS > peak {
				peak = r.PeakRSS
			}
		}
	}
	if peak == 0 {
		t.Fatal("results/latest/report.json: no peak RSS of run")
	}
	const bigTxBound = 200 << 20
	for _, file := range cases {
		o := renderCase(t, file)
		r := o.deployment.Spec.Template.Spec.Containers[0].Resources
		req, lim := r.Requests[corev1.ResourceMemory], r.Limits[corev1.ResourceMemory]
		if req.Value() < peak || lim.Cmp(*resource.NewQuantity(bigTxBound, resource.BinarySI)) <= 0 {
			t.Errorf("%s: memory request %s, limit %s: want the request above run's measured peak RSS %d bytes and the limit above %d", file, req.String(), lim.String(), peak, bigTxBound)
		}
		t.Logf("%s: memory request %s, limit %s; run's peak RSS in results/latest: %.1f MB", file, req.String(), lim.String(), float64(peak)/1e6)
	}
}

// TestRulesAndDashboardAreDeploysCopies: the chart's files/ hold deploy/'s alert rules and
// dashboard byte for byte (Helm reads only files inside the chart), and the PrometheusRule and
// the dashboard ConfigMap carry them unchanged.
func TestRulesAndDashboardAreDeploysCopies(t *testing.T) {
	for copyPath, canonical := range map[string]string{
		"files/cdc-relay-alerts.yml": "deploy/prometheus/cdc-relay-alerts.yml",
		"files/cdc-relay.json":       "deploy/grafana/cdc-relay.json",
	} {
		a, err1 := os.ReadFile(filepath.Join(chartDir, copyPath))
		b, err2 := os.ReadFile(filepath.Join(repoRoot, canonical))
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("deploy/helm/cdc-relay/%s differs from %s: edit %s and copy it over (cp %s deploy/helm/cdc-relay/%s)", copyPath, canonical, canonical, canonical, copyPath)
		}
	}
	o := renderCase(t, "examples/ha-tls-sasl.yaml")
	rules, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "cdc-relay-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(rules, &want); err != nil {
		t.Fatalf("deploy/prometheus/cdc-relay-alerts.yml is not a PrometheusRule spec: %v", err)
	}
	got, _ := json.Marshal(o.prometheusRule.Spec)
	wantJSON, _ := json.Marshal(want)
	if len(want.Groups) == 0 || len(want.Groups[0].Rules) == 0 || !bytes.Equal(got, wantJSON) {
		t.Errorf("the PrometheusRule's spec differs from deploy/prometheus/cdc-relay-alerts.yml:\n%s\nwant\n%s", got, wantJSON)
	}
	dash, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "grafana", "cdc-relay.json"))
	if err != nil {
		t.Fatal(err)
	}
	if o.dashboard == nil || o.dashboard.Data["cdc-relay.json"] != string(dash) || o.dashboard.Labels["grafana_dashboard"] == "" {
		t.Errorf("the dashboard ConfigMap does not carry deploy/grafana/cdc-relay.json with the grafana_dashboard label")
	}
}

// TestBadValuesAreRefused: what must not install fails to render, saying what to change.
func TestBadValuesAreRefused(t *testing.T) {
	minimal := func() map[string]any { return readValues(t, "examples/minimal.yaml", nil) }
	relayWith := func(k string, v any) map[string]any {
		return merge(minimal(), map[string]any{"relay": map[string]any{k: v}})
	}
	for _, c := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"the chart's defaults alone", map[string]any{}, "relay.pg-url is required"},
		{"no brokers", relayWith("brokers", ""), "relay.brokers is required"},
		{"a password in pg-url", relayWith("pg-url", "postgres://cdc_relay:hunter2@db:5432/app"), "secrets.pgPassword"},
		{"a password in a keyword pg-url", relayWith("pg-url", "host=db user=cdc_relay password=hunter2"), "secrets.pgPassword"},
		{"kafka-password in values", relayWith("kafka-password", "hunter2"), "kafka-password"},
		{"a flag run does not have", relayWith("no-such-flag", "x"), "no-such-flag"},
		{"a flag the chart sets", relayWith("metrics-addr", "127.0.0.1:9188"), "metrics-addr"},
		{"a CDC_RELAY_ variable in extraEnv", merge(minimal(), map[string]any{"extraEnv": []any{map[string]any{"name": "CDC_RELAY_SLOT", "value": "x"}}}), "extraEnv"},
		{"a client certificate without its key", merge(minimal(), map[string]any{"secrets": map[string]any{"kafkaTLS": map[string]any{"secretName": "k", "certKey": "tls.crt"}}}), "keyKey"},
		{"anti-affinity misspelt", merge(minimal(), map[string]any{"podAntiAffinity": "strict"}), "podAntiAffinity"},
	} {
		_, err := render(t, c.vals)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error naming %q, got %v", c.name, c.want, err)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}
}

// TestSlotJobTakesRelaysValues: the Job creates the slot and publication run streams from,
// with the example's failover flag, and runs before install and upgrade.
func TestSlotJobTakesRelaysValues(t *testing.T) {
	o := renderCase(t, "examples/ha-tls-sasl.yaml")
	job, run := envOf(o.job.Spec.Template.Spec.Containers[0]), envOf(o.deployment.Spec.Template.Spec.Containers[0])
	for _, k := range []string{"CDC_RELAY_PG_URL", "CDC_RELAY_SLOT", "CDC_RELAY_PUBLICATION", "CDC_RELAY_TABLE", "CDC_RELAY_PG_PASSWORD_FILE"} {
		if job[k] == "" || job[k] != run[k] {
			t.Errorf("slot Job %s=%q, relay %q: want the same", k, job[k], run[k])
		}
	}
	if job["CDC_RELAY_FAILOVER"] != "true" {
		t.Errorf("slot Job CDC_RELAY_FAILOVER=%q, want true (slotJob.extraFlags.failover)", job["CDC_RELAY_FAILOVER"])
	}
	for _, k := range []string{"CDC_RELAY_KAFKA_PASSWORD_FILE", "CDC_RELAY_BROKERS"} {
		if _, ok := job[k]; ok {
			t.Errorf("slot Job sets %s: slot create does not talk to Kafka", k)
		}
	}
	m, err := render(t, readValues(t, "examples/minimal.yaml", map[string]any{"relay": map[string]any{"publication": "orders_outbox, audit_outbox"}}))
	if err != nil {
		t.Fatal(err)
	}
	o = decodeStrict(t, "two publications", m)
	if p := envOf(o.job.Spec.Template.Spec.Containers[0])["CDC_RELAY_PUBLICATION"]; p != "orders_outbox" {
		t.Errorf("two publications: the slot Job creates %q, want the first, orders_outbox", p)
	}
}

func ptrOr0(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// TestPgURLGetsTheMountedCertificates: with secrets.pgTLS the chart appends the mounted files
// to pg-url in its own syntax (URL query or keyword/value pairs) and keeps an sslmode it has.
func TestPgURLGetsTheMountedCertificates(t *testing.T) {
	const dir = "/etc/cdc-relay/secrets/pg-tls/"
	tls := map[string]any{"secrets": map[string]any{"pgTLS": map[string]any{"secretName": "pg-tls", "certKey": "tls.crt", "keyKey": "tls.key"}}}
	for in, want := range map[string]string{
		"postgres://u@db:5432/app":                                 "postgres://u@db:5432/app?sslmode=verify-full&sslrootcert=" + dir + "ca.crt&sslcert=" + dir + "tls.crt&sslkey=" + dir + "tls.key",
		"postgres://u@db/app?sslmode=verify-ca&application_name=x": "postgres://u@db/app?sslmode=verify-ca&application_name=x&sslrootcert=" + dir + "ca.crt&sslcert=" + dir + "tls.crt&sslkey=" + dir + "tls.key",
		"host=db user=u dbname=app":                                "host=db user=u dbname=app sslmode=verify-full sslrootcert=" + dir + "ca.crt sslcert=" + dir + "tls.crt sslkey=" + dir + "tls.key",
	} {
		m, err := render(t, readValues(t, "examples/minimal.yaml", merge(map[string]any{"relay": map[string]any{"pg-url": in}}, tls)))
		if err != nil {
			t.Fatalf("pg-url %q: %v", in, err)
		}
		o := decodeStrict(t, in, m)
		for what, c := range map[string]corev1.Container{"relay": o.deployment.Spec.Template.Spec.Containers[0], "slot Job": o.job.Spec.Template.Spec.Containers[0]} {
			if got := envOf(c)["CDC_RELAY_PG_URL"]; got != want {
				t.Errorf("pg-url %q: %s gets\n%q, want\n%q", in, what, got, want)
			}
		}
	}
}

// renderUpgrade renders one of cases as helm upgrade does, and decodes it.
func renderUpgrade(t *testing.T, file string) *objects {
	t.Helper()
	m, err := renderRelease(t, readValues(t, file, nil), true)
	if err != nil {
		t.Fatalf("helm upgrade -f %s: %v", file, err)
	}
	return decodeStrict(t, file+" (upgrade)", m)
}

// TestSlotCheckOnInstallWhenAsked: slotJob.requireExistingSlot puts the slot check into the
// install's Job as well, for tools that render every sync as an install (Argo CD).
func TestSlotCheckOnInstallWhenAsked(t *testing.T) {
	m, err := render(t, readValues(t, "examples/minimal.yaml", map[string]any{"slotJob": map[string]any{"requireExistingSlot": true}}))
	if err != nil {
		t.Fatal(err)
	}
	o := decodeStrict(t, "requireExistingSlot", m)
	if ic := o.job.Spec.Template.Spec.InitContainers; len(ic) != 1 || strings.Join(ic[0].Args, " ") != "slot status" {
		t.Errorf("slotJob.requireExistingSlot: the install's Job runs %v first, want slot status", ic)
	}
}
