package helmchart

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestTheBinaryAcceptsTheShardsArguments runs each shard's container command (`run --shard
// I/3`), the slot Job's (`slot create --shards 3`) and the upgrade's checks with their rendered
// environment, as TestTheBinaryAcceptsTheRenderedValues does: a bad --log-format added at the
// end stops each at validation (exit 2 naming it), so any other complaint is the chart's.
func TestTheBinaryAcceptsTheShardsArguments(t *testing.T) {
	for _, file := range cases {
		o, up := renderShards(t, file, 3, false), renderShards(t, file, 3, true)
		var cs []corev1.Container
		for _, d := range o.deployments {
			cs = append(cs, d.Spec.Template.Spec.Containers...)
		}
		cs = append(cs, o.jobs[0].Spec.Template.Spec.Containers...)
		cs = append(cs, up.jobs[0].Spec.Template.Spec.InitContainers...)
		for _, c := range cs {
			args := append(append([]string(nil), c.Args...), "--log-format", "not-a-format")
			cmd := exec.Command(relay(t), args...)
			cmd.Env = []string{"HOME=" + t.TempDir()}
			for _, e := range c.Env {
				cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
			err := cmd.Run()
			timer.Stop()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(out.String(), "--log-format") ||
				strings.Contains(out.String(), "shard") {
				t.Errorf("%s: cdc-relay %s: want exit 2 naming --log-format only, got %v\n%s", file, strings.Join(args, " "), err, out.String())
			}
		}
	}
}
