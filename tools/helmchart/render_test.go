package helmchart

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const (
	repoRoot = "../.."
	chartDir = repoRoot + "/deploy/helm/cdc-relay"
	release  = "orders-relay"
	ns       = "cdc"
)

// The values files every check renders: the chart's defaults with the four required values
// (examples/minimal.yaml), and the production example (HA, TLS to both, SASL, monitoring).
var cases = []string{"examples/minimal.yaml", "examples/ha-tls-sasl.yaml"}

// loadChart loads the chart as `helm template` does (.helmignore applied).
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load %s: %v", chartDir, err)
	}
	return c
}

// readValues reads a values file of the chart (a path inside chartDir), with overrides merged
// over it (nested maps merged, other values replaced).
func readValues(t *testing.T, file string, overrides map[string]any) map[string]any {
	t.Helper()
	vals := map[string]any{}
	if file != "" {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, file))
		if err != nil {
			t.Fatalf("read %s: %v", file, err)
		}
		vals = v.AsMap()
	}
	return merge(vals, overrides)
}

func merge(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				dst[k] = merge(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// render is `helm template` with vals: the schema checked, then every template rendered
// strictly (a missing value the templates read is an error). It returns the manifests by
// template name, empty ones and NOTES.txt left out.
func render(t *testing.T, vals map[string]any) (map[string]string, error) {
	t.Helper()
	return renderRelease(t, vals, false)
}

// renderRelease renders as render does, for an upgrade (helm upgrade) when upgrade is set.
func renderRelease(t *testing.T, vals map[string]any, upgrade bool) (map[string]string, error) {
	t.Helper()
	c := loadChart(t)
	opts := chartutil.ReleaseOptions{Name: release, Namespace: ns, IsInstall: !upgrade, IsUpgrade: upgrade, Revision: 1}
	if upgrade {
		opts.Revision = 2
	}
	top, err := chartutil.ToRenderValues(c, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	out, err := engine.Engine{Strict: true}.Render(c, top)
	if err != nil {
		return nil, err
	}
	for name, m := range out {
		if strings.HasSuffix(name, "NOTES.txt") || strings.TrimSpace(m) == "" {
			delete(out, name)
		}
	}
	return out, nil
}

// objects are the rendered manifests of one values file, decoded into the API types.
type objects struct {
	file            string
	deployment      *appsv1.Deployment
	job             *batchv1.Job
	pdb             *policyv1.PodDisruptionBudget
	service         *corev1.Service
	serviceAccount  *corev1.ServiceAccount
	dashboard       *corev1.ConfigMap
	serviceMonitor  *monitoringv1.ServiceMonitor
	prometheusRule  *monitoringv1.PrometheusRule
	kinds           []string
	manifestsByName map[string]string
}

// field sets the field of a kind ("apps/v1 Deployment") to a new value of its API type and
// returns it to decode into; false for a kind the chart has no business rendering.
func (o *objects) field(kind string) (any, bool) {
	fields := map[string]any{
		"apps/v1 Deployment": &o.deployment, "batch/v1 Job": &o.job, "policy/v1 PodDisruptionBudget": &o.pdb,
		"v1 Service": &o.service, "v1 ServiceAccount": &o.serviceAccount, "v1 ConfigMap": &o.dashboard,
		"monitoring.coreos.com/v1 ServiceMonitor": &o.serviceMonitor, "monitoring.coreos.com/v1 PrometheusRule": &o.prometheusRule,
	}
	f, ok := fields[kind]
	if !ok {
		return nil, false
	}
	p := reflect.ValueOf(f).Elem() // the field, a *T
	p.Set(reflect.New(p.Type().Elem()))
	return p.Interface(), true
}

// documentMeta is what every rendered document says of itself.
type documentMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

// eachDocument calls fn with every YAML document of every manifest (by the manifests' names,
// in order; empty documents left out) and what it says of itself, failing the test (what
// names the render) on a document that is not YAML.
func eachDocument(t *testing.T, what string, manifests map[string]string, fn func(name, doc string, meta documentMeta)) {
	t.Helper()
	names := make([]string, 0, len(manifests))
	for n := range manifests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for i, doc := range strings.Split(manifests[name], "\n---") {
			if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(doc), "---")) == "" {
				continue
			}
			var meta documentMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s: %s document %d is not YAML: %v\n%s", what, name, i, err, doc)
			}
			fn(name, doc, meta)
		}
	}
}

// decodeStrict decodes every document of every manifest into the API type of its kind,
// refusing unknown and duplicate fields (sigs.k8s.io/yaml's strict mode), and a kind the chart
// has no business rendering.
func decodeStrict(t *testing.T, file string, manifests map[string]string) *objects {
	t.Helper()
	o := &objects{file: file, manifestsByName: manifests}
	eachDocument(t, file, manifests, func(name, doc string, meta documentMeta) {
		into, ok := o.field(meta.APIVersion + " " + meta.Kind)
		if !ok {
			t.Fatalf("%s: %s renders %s %s, which this test does not know (a Secret? the chart must never make one)", file, name, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %s (%s) does not decode strictly into the API type: %v\n%s", file, name, meta.Kind, err, doc)
		}
		o.kinds = append(o.kinds, meta.Kind)
	})
	if o.deployment == nil {
		t.Fatalf("%s: no Deployment rendered", file)
	}
	return o
}

// renderCase renders one of cases (its file over the chart's defaults) and decodes it.
func renderCase(t *testing.T, file string) *objects {
	t.Helper()
	m, err := render(t, readValues(t, file, nil))
	if err != nil {
		t.Fatalf("helm template -f %s: %v", file, err)
	}
	return decodeStrict(t, file, m)
}

var (
	buildOnce sync.Once
	relayBin  string
	buildErr  error
)

// TestMain removes the relay binary that relay built, if it did.
func TestMain(m *testing.M) {
	code := m.Run()
	if relayBin != "" {
		_ = os.RemoveAll(filepath.Dir(relayBin))
	}
	os.Exit(code)
}

// relay builds cdc-relay from this checkout once per test binary and returns its path.
func relay(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "helmchart-relay-")
		if err != nil {
			buildErr = err
			return
		}
		relayBin = filepath.Join(dir, "cdc-relay")
		cmd := exec.Command("go", "build", "-o", relayBin, "./cmd/cdc-relay")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/cdc-relay: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return relayBin
}

var helpLine = regexp.MustCompile(`(?m)^  --([a-z0-9-]+) \[(CDC_RELAY_[A-Z0-9_]+)\]$`)

// help runs `cdc-relay <command...> --help` (run: --help-all, which lists the tuning flags too)
// and returns its flags: name -> environment twin.
func help(t *testing.T, command ...string) map[string]string {
	t.Helper()
	ask := "--help"
	if command[0] == "run" {
		ask = "--help-all"
	}
	cmd := exec.Command(relay(t), append(command, ask)...)
	cmd.Env = []string{} // no CDC_RELAY_* of the caller's
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("cdc-relay %s --help: %v\n%s", strings.Join(command, " "), err, out.String())
	}
	flags := map[string]string{}
	for _, m := range helpLine.FindAllStringSubmatch(out.String(), -1) {
		flags[m[1]] = m[2]
	}
	if len(flags) < 5 {
		t.Fatalf("cdc-relay %s --help: found %d flags in\n%s", strings.Join(command, " "), len(flags), out.String())
	}
	return flags
}

func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

func TestChartLints(t *testing.T) {
	for _, file := range cases {
		wantLintClean(t, "-f "+file, readValues(t, file, nil))
	}
}

// wantLintClean fails t for every message above info that `helm lint` gives the chart with
// values (what names them: "-f FILE [--set ...]"), and logs the others.
func wantLintClean(t *testing.T, what string, values map[string]any) {
	t.Helper()
	for _, m := range lint.All(chartDir, values, ns, false).Messages {
		if m.Severity > support.InfoSev {
			t.Errorf("helm lint %s: %s", what, m)
		} else {
			t.Logf("helm lint %s: %s", what, m)
		}
	}
}

// TestRenderedManifestsDecodeStrictly renders both cases and checks which objects each makes.
func TestRenderedManifestsDecodeStrictly(t *testing.T) {
	want := map[string][]string{
		"examples/minimal.yaml":     {"Deployment", "Job", "PodDisruptionBudget", "Service", "ServiceAccount"},
		"examples/ha-tls-sasl.yaml": {"ConfigMap", "Deployment", "Job", "PodDisruptionBudget", "PrometheusRule", "Service", "ServiceAccount", "ServiceMonitor"},
	}
	for _, file := range cases {
		o := renderCase(t, file)
		got := append([]string(nil), o.kinds...)
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want[file], ",") {
			t.Errorf("%s renders %v, want %v", file, got, want[file])
		}
	}
}

// TestEnvironmentIsWhatTheBinaryReads: every variable the relay's container gets is an
// environment twin `cdc-relay run --help` lists, and the slot Job's are ones `slot create --help`
// lists (the CLI reads only its own command's twins: any other is silently ignored). Both
// containers run their command with no flags on the command line.
func TestEnvironmentIsWhatTheBinaryReads(t *testing.T) {
	runTwins, createTwins, statusTwins := twinSet(help(t, "run")), twinSet(help(t, "slot", "create")), twinSet(help(t, "slot", "status"))
	for _, file := range cases {
		o := renderCase(t, file)
		checkEnv(t, file+": relay", o.deployment.Spec.Template.Spec.Containers, runTwins, []string{"run"})
		if o.job == nil {
			t.Fatalf("%s: no slot Job", file)
		}
		checkEnv(t, file+": slot Job", o.job.Spec.Template.Spec.Containers, createTwins, []string{"slot", "create"})
		if n := len(o.job.Spec.Template.Spec.InitContainers); n != 0 {
			t.Errorf("%s: the install's slot Job has %d init containers, want none (the slot may not exist yet)", file, n)
		}
		m, err := renderRelease(t, readValues(t, file, nil), true)
		if err != nil {
			t.Fatalf("%s: helm upgrade: %v", file, err)
		}
		up := decodeStrict(t, file+" (upgrade)", m)
		checkEnv(t, file+": upgrade's slot check", up.job.Spec.Template.Spec.InitContainers, statusTwins, []string{"slot", "status"})
		checkEnv(t, file+": upgrade's slot Job", up.job.Spec.Template.Spec.Containers, createTwins, []string{"slot", "create"})
		if a := o.job.Annotations["helm.sh/hook"]; a != "pre-install,pre-upgrade" {
			t.Errorf("%s: slot Job hook %q, want pre-install,pre-upgrade", file, a)
		}
	}
}

func twinSet(flags map[string]string) map[string]bool {
	s := map[string]bool{}
	for _, twin := range flags {
		s[twin] = true
	}
	return s
}

func checkEnv(t *testing.T, what string, cs []corev1.Container, twins map[string]bool, args []string) {
	t.Helper()
	if len(cs) != 1 {
		t.Fatalf("%s: %d containers, want 1", what, len(cs))
	}
	c := cs[0]
	if len(c.Command) != 0 || strings.Join(c.Args, " ") != strings.Join(args, " ") {
		t.Errorf("%s: command %q args %q, want the image's entrypoint with args %q", what, c.Command, c.Args, args)
	}
	seen := map[string]bool{}
	for _, e := range c.Env {
		if seen[e.Name] {
			t.Errorf("%s: %s set twice", what, e.Name)
		}
		seen[e.Name] = true
		if !twins[e.Name] {
			t.Errorf("%s: sets %s, which `cdc-relay %s --help` does not list", what, e.Name, strings.Join(args, " "))
		}
		if e.ValueFrom != nil {
			t.Errorf("%s: %s comes from %v: secrets are mounted as files, never put in the environment", what, e.Name, e.ValueFrom)
		}
		if strings.Contains(e.Name, "PASSWORD") && !strings.HasSuffix(e.Name, "_FILE") {
			t.Errorf("%s: %s: a password in the environment", what, e.Name)
		}
	}
	for _, need := range []string{"CDC_RELAY_PG_URL", "CDC_RELAY_SLOT", "CDC_RELAY_PUBLICATION"} {
		if !seen[need] && !(need == "CDC_RELAY_PUBLICATION" && strings.Join(args, " ") == "slot status") {
			t.Errorf("%s: %s not set", what, need)
		}
	}
	if len(c.EnvFrom) != 0 {
		t.Errorf("%s: envFrom %v: the chart sets each variable by name", what, c.EnvFrom)
	}
}

// TestValuesSchemaNamesRunsFlags: values.schema.json's relay keys are exactly run's flags less
// the ones the chart sets itself, so a typo is refused at install and a new flag of run fails
// here until the chart can set it.
func TestValuesSchemaNamesRunsFlags(t *testing.T) {
	chartSets := map[string]bool{"shard": true, "metrics-addr": true, "shutdown-timeout": true, "pg-password-file": true,
		"kafka-password": true, "kafka-password-file": true, "kafka-ca-file": true, "kafka-cert-file": true, "kafka-key-file": true}
	var schema struct {
		Properties struct {
			Relay struct {
				Properties map[string]any `json:"properties"`
			} `json:"relay"`
			SlotJob struct {
				Properties struct {
					ExtraFlags struct {
						Properties map[string]any `json:"properties"`
					} `json:"extraFlags"`
				} `json:"properties"`
			} `json:"slotJob"`
		} `json:"properties"`
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	run := help(t, "run")
	for f := range run {
		_, inSchema := schema.Properties.Relay.Properties[f]
		switch {
		case chartSets[f] && inSchema:
			t.Errorf("values.schema.json: relay.%s is set by the chart; remove it from the schema", f)
		case !chartSets[f] && !inSchema:
			t.Errorf("values.schema.json: run's --%s is missing from relay's properties: add it (and to values.yaml's comment if it needs one)", f)
		}
	}
	for f := range schema.Properties.Relay.Properties {
		if _, ok := run[f]; !ok {
			t.Errorf("values.schema.json: relay.%s is no flag of `cdc-relay run`", f)
		}
	}
	create := help(t, "slot", "create")
	for f := range schema.Properties.SlotJob.Properties.ExtraFlags.Properties {
		if _, ok := create[f]; !ok {
			t.Errorf("values.schema.json: slotJob.extraFlags.%s is no flag of `cdc-relay slot create`", f)
		}
	}
}
