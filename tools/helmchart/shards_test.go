package helmchart

import (
	"fmt"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// shardLabel is the label that tells one shard's pods from another's.
const shardLabel = "cdc-relay/shard"

// allObjects are every rendered object, by kind (decodeStrict keeps one of each kind; a
// sharded release renders several Deployments and budgets).
type allObjects struct {
	deployments    []*appsv1.Deployment
	pdbs           []*policyv1.PodDisruptionBudget
	jobs           []*batchv1.Job
	services       []*corev1.Service
	serviceMonitor []*monitoringv1.ServiceMonitor
	names          []string // "Kind name" of every object, in render order
}

// decodeAll decodes every document of every manifest strictly, as decodeStrict does, keeping
// all objects of each kind.
func decodeAll(t *testing.T, what string, manifests map[string]string) *allObjects {
	t.Helper()
	o := &allObjects{}
	eachDocument(t, what, manifests, func(file, doc string, meta documentMeta) {
		var into any
		switch meta.Kind {
		case "Deployment":
			into = collect(&o.deployments)
		case "PodDisruptionBudget":
			into = collect(&o.pdbs)
		case "Job":
			into = collect(&o.jobs)
		case "Service":
			into = collect(&o.services)
		case "ServiceMonitor":
			into = collect(&o.serviceMonitor)
		default:
			into = &map[string]any{}
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %s (%s) does not decode strictly: %v\n%s", what, file, meta.Kind, err, doc)
		}
		o.names = append(o.names, meta.Kind+" "+meta.Metadata.Name)
	})
	return o
}

// collect appends a new, empty object to list and returns it, for decoding into.
func collect[T any](list *[]*T) *T {
	v := new(T)
	*list = append(*list, v)
	return v
}

func renderShards(t *testing.T, file string, shards int, upgrade bool) *allObjects {
	t.Helper()
	m, err := renderRelease(t, readValues(t, file, map[string]any{"shards": shards}), upgrade)
	if err != nil {
		t.Fatalf("%s with shards=%d: %v", file, shards, err)
	}
	return decodeAll(t, fmt.Sprintf("%s, shards=%d", file, shards), m)
}

// TestShardsRenderOnePairPerShard: shards: 3 renders three active/standby pairs, each a
// Deployment of its own name running `run --shard I/3` (so its own slot, and with it its own
// standby lock and transactional id), whose selector takes its own pods and no other pair's,
// with its own budget and anti-affinity; the metrics Service and ServiceMonitor cover every
// shard's pods; the slot Job creates the shards (`slot create --shards 3`) and an upgrade
// first checks every shard's slot; no two objects share a kind and name.
func TestShardsRenderOnePairPerShard(t *testing.T) {
	const n = 3
	runTwins, createTwins, statusTwins := twinSet(help(t, "run")), twinSet(help(t, "slot", "create")), twinSet(help(t, "slot", "status"))
	for _, file := range cases {
		wantLintClean(t, fmt.Sprintf("-f %s --set shards=%d", file, n), readValues(t, file, map[string]any{"shards": n}))
		o := renderShards(t, file, n, false)
		plain := renderCase(t, file)
		seen := map[string]bool{}
		for _, name := range o.names {
			if seen[name] {
				t.Errorf("%s: %s rendered twice", file, name)
			}
			seen[name] = true
		}
		if len(o.deployments) != n || len(o.pdbs) != n {
			t.Fatalf("%s: %d Deployments and %d budgets, want %d of each", file, len(o.deployments), len(o.pdbs), n)
		}
		base := envOf(plain.deployment.Spec.Template.Spec.Containers[0])
		for i, d := range o.deployments {
			what := fmt.Sprintf("%s: shard %d", file, i)
			label := fmt.Sprintf("s%dof%d", i, n)
			if want := plain.deployment.Name + "-" + label; d.Name != want {
				t.Errorf("%s: Deployment %q, want %q", what, d.Name, want)
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
				t.Errorf("%s: replicas %v, want 2 (an active/standby pair per shard)", what, d.Spec.Replicas)
			}
			pods := labels.Set(d.Spec.Template.Labels)
			if pods[shardLabel] != label || d.Labels[shardLabel] != label {
				t.Errorf("%s: pod labels %v, Deployment labels %v: want %s=%s", what, pods, d.Labels, shardLabel, label)
			}
			cs := d.Spec.Template.Spec.Containers
			checkEnv(t, what, cs, runTwins, []string{"run", "--shard", fmt.Sprintf("%d/%d", i, n)})
			// The same environment as the unsharded pair's: the slot and publication are the
			// base names, from which run --shard derives the shard's.
			if got := envOf(cs[0]); fmt.Sprint(got) != fmt.Sprint(base) {
				t.Errorf("%s: environment\n%v\nwant the unsharded pair's\n%v", what, got, base)
			}
			for j, other := range o.deployments {
				if sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels); sel.Matches(labels.Set(other.Spec.Template.Labels)) != (i == j) {
					t.Errorf("%s: its selector %v matches shard %d's pods %v: want its own pods only", what, d.Spec.Selector.MatchLabels, j, other.Spec.Template.Labels)
				}
			}
			for _, j := range o.jobs {
				if labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(j.Spec.Template.Labels)) {
					t.Errorf("%s: the slot Job's pods carry the Deployment's selector labels", what)
				}
			}
			var terms []corev1.PodAffinityTerm
			if aff := d.Spec.Template.Spec.Affinity; aff != nil && aff.PodAntiAffinity != nil {
				terms = append(terms, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
				for _, w := range aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
					terms = append(terms, w.PodAffinityTerm)
				}
			}
			if len(terms) != 1 || !selects(t, terms[0].LabelSelector.MatchLabels, pods) || terms[0].LabelSelector.MatchLabels[shardLabel] != label {
				t.Errorf("%s: anti-affinity %+v: want one term that keeps this pair's two pods apart", what, terms)
			}
			var budgets []string
			for _, p := range o.pdbs {
				if selects(t, p.Spec.Selector.MatchLabels, pods) {
					budgets = append(budgets, p.Name)
					if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.String() != "1" {
						t.Errorf("%s: budget %s minAvailable %v, want 1", what, p.Name, p.Spec.MinAvailable)
					}
				}
			}
			if len(budgets) != 1 || budgets[0] != d.Name {
				t.Errorf("%s: budgets %v select its pods, want exactly its own, %s (one budget over all shards would let all but one streaming pod go)", what, budgets, d.Name)
			}
			if len(o.services) != 1 || !selects(t, o.services[0].Spec.Selector, pods) {
				t.Errorf("%s: the metrics Service does not select its pods", what)
			}
		}
		if len(o.serviceMonitor) != len(plain.kindsOf("ServiceMonitor")) {
			t.Errorf("%s: %d ServiceMonitors, want as many as unsharded (%d)", file, len(o.serviceMonitor), len(plain.kindsOf("ServiceMonitor")))
		}
		for _, sm := range o.serviceMonitor {
			if !selects(t, sm.Spec.Selector.MatchLabels, labels.Set(o.services[0].Labels)) || sm.Spec.Endpoints[0].Port != o.services[0].Spec.Ports[0].Name {
				t.Errorf("%s: the ServiceMonitor does not scrape the metrics Service, which covers every shard", file)
			}
		}
		if len(o.jobs) != 1 {
			t.Fatalf("%s: %d Jobs, want the slot Job", file, len(o.jobs))
		}
		job := o.jobs[0].Spec.Template.Spec
		checkEnv(t, file+": slot Job", job.Containers, createTwins, []string{"slot", "create", "--shards", "3"})
		if got, want := fmt.Sprint(envOf(job.Containers[0])), fmt.Sprint(envOf(plain.job.Spec.Template.Spec.Containers[0])); got != want {
			t.Errorf("%s: slot Job environment\n%s\nwant the unsharded one's\n%s", file, got, want)
		}
		// The key column the shards hash is run's: with a profile or a column of its own,
		// the Job passes them (unsharded, slot create refuses them).
		m, err := render(t, readValues(t, file, map[string]any{"shards": n, "relay": map[string]any{"column-aggregate-id": "order_id", "profile": "debezium"}}))
		if err != nil {
			t.Fatal(err)
		}
		keyed := envOf(decodeAll(t, file+" keyed", m).jobs[0].Spec.Template.Spec.Containers[0])
		if keyed["CDC_RELAY_COLUMN_AGGREGATE_ID"] != "order_id" || keyed["CDC_RELAY_PROFILE"] != "debezium" {
			t.Errorf("%s: the slot Job's key column %q and profile %q, want run's (order_id, debezium)", file, keyed["CDC_RELAY_COLUMN_AGGREGATE_ID"], keyed["CDC_RELAY_PROFILE"])
		}
		if len(job.InitContainers) != 0 {
			t.Errorf("%s: the install's slot Job checks %d slots first, want none (they may not exist yet)", file, len(job.InitContainers))
		}

		up := renderShards(t, file, n, true)
		ic := up.jobs[0].Spec.Template.Spec.InitContainers
		if len(ic) != n {
			t.Fatalf("%s: the upgrade's slot Job checks %d slots, want one per shard (%d)", file, len(ic), n)
		}
		slot := base["CDC_RELAY_SLOT"]
		names := map[string]bool{}
		for i, c := range ic {
			names[c.Name] = true
			checkEnv(t, fmt.Sprintf("%s: upgrade's check of shard %d", file, i), []corev1.Container{c}, statusTwins, []string{"slot", "status"})
			if got, want := envOf(c)["CDC_RELAY_SLOT"], fmt.Sprintf("%s_s%dof%d", slot, i, n); got != want {
				t.Errorf("%s: the upgrade's check %d asks for slot %q, want %q", file, i, got, want)
			}
		}
		if len(names) != n {
			t.Errorf("%s: init container names %v are not distinct", file, names)
		}
	}
}

func (o *objects) kindsOf(kind string) []string {
	var out []string
	for _, k := range o.kinds {
		if k == kind {
			out = append(out, k)
		}
	}
	return out
}

// TestShardsZeroIsTheUnshardedChart: shards: 0 renders exactly what a values file without it
// renders (the chart before shards: one pair, no shard label, no --shard).
func TestShardsZeroIsTheUnshardedChart(t *testing.T) {
	for _, file := range cases {
		for _, upgrade := range []bool{false, true} {
			without, err := renderRelease(t, readValues(t, file, nil), upgrade)
			if err != nil {
				t.Fatal(err)
			}
			zero, err := renderRelease(t, readValues(t, file, map[string]any{"shards": 0}), upgrade)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(without) != fmt.Sprint(zero) {
				t.Errorf("%s (upgrade %v): shards: 0 renders differently from no shards value", file, upgrade)
			}
			o := decodeAll(t, file, zero)
			if len(o.deployments) != 1 || len(o.pdbs) != 1 {
				t.Fatalf("%s: %d Deployments, %d budgets: want one pair", file, len(o.deployments), len(o.pdbs))
			}
			d := o.deployments[0]
			if _, ok := d.Spec.Template.Labels[shardLabel]; ok || strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ") != "run" ||
				strings.Join(o.jobs[0].Spec.Template.Spec.Containers[0].Args, " ") != "slot create" {
				t.Errorf("%s: unsharded pair %s has the shard label or shard arguments", file, d.Name)
			}
		}
	}
}

// TestShardNamesStayDistinctAndShort: with the longest release name and 64 shards, every
// pair's name fits in 63 characters (a label value's limit), ends in its own shard, and no two
// are equal.
func TestShardNamesStayDistinctAndShort(t *testing.T) {
	long := strings.Repeat("x", 63)
	m, err := render(t, readValues(t, "examples/minimal.yaml", map[string]any{"shards": 64, "fullnameOverride": long}))
	if err != nil {
		t.Fatal(err)
	}
	o := decodeAll(t, "64 shards", m)
	names := map[string]bool{}
	for i, d := range o.deployments {
		if len(d.Name) > 63 || !strings.HasSuffix(d.Name, fmt.Sprintf("-s%dof64", i)) || strings.Contains(d.Name, "--") {
			t.Errorf("shard %d: name %q: want at most 63 characters ending in -s%dof64", i, d.Name, i)
		}
		names[d.Name] = true
	}
	if len(o.deployments) != 64 || len(names) != 64 {
		t.Errorf("%d Deployments, %d distinct names: want 64", len(o.deployments), len(names))
	}
}

// TestBadShardValuesAreRefused: a shard count out of 0..64 or not a whole number fails at the
// schema; what would make the shards collide fails to render, saying what to change.
func TestBadShardValuesAreRefused(t *testing.T) {
	minimal := func(over map[string]any) map[string]any { return readValues(t, "examples/minimal.yaml", over) }
	for _, c := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"65 shards", minimal(map[string]any{"shards": 65}), "shards"},
		{"-1 shards", minimal(map[string]any{"shards": -1}), "shards"},
		{"2.5 shards", minimal(map[string]any{"shards": 2.5}), "shards"},
		{"shards as a string", minimal(map[string]any{"shards": "3"}), "shards"},
		{"two publications", minimal(map[string]any{"shards": 3, "relay": map[string]any{"publication": "a,b"}}), "name one"},
		{"one transactional id for every shard", minimal(map[string]any{"shards": 3, "relay": map[string]any{"transactional-id": "orders"}}), "relay.transactional-id"},
		{"relay.shard", minimal(map[string]any{"relay": map[string]any{"shard": "0/3"}}), "shard"},
	} {
		_, err := render(t, c.vals)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error naming %q, got %v", c.name, c.want, err)
		}
	}
	// An explicit transactional id is fine unsharded.
	if _, err := render(t, minimal(map[string]any{"relay": map[string]any{"transactional-id": "orders"}})); err != nil {
		t.Errorf("transactional-id unsharded: %v", err)
	}
}
