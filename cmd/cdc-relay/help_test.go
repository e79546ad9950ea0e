package main

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
)

// run's --help lists its flags under the groups' headings and names the tuning ones, which
// --help-all (or the word help-all) lists too; every flag is in exactly one group, so a new
// flag cannot fall out of the help.

// runFlagCount is how many flags run has: a new flag must be placed in a group of runFlagGroups.
const runFlagCount = 69

func TestRunHelpGroupsEveryFlag(t *testing.T) {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f.register(fs)
	seen := map[string]string{}
	for _, g := range runFlagGroups {
		for _, n := range g.names {
			if fs.Lookup(n) == nil {
				t.Errorf("group %s lists --%s, which run does not have", g.title, n)
			}
			if prev, dup := seen[n]; dup {
				t.Errorf("--%s is in groups %s and %s", n, prev, g.title)
			}
			seen[n] = g.title
		}
	}
	total := 0
	fs.VisitAll(func(fl *flag.Flag) {
		total++
		if _, ok := seen[fl.Name]; !ok {
			t.Errorf("--%s is in no group of run's --help", fl.Name)
		}
	})
	if total != runFlagCount {
		t.Errorf("run has %d flags, want %d (update runFlagCount, and the groups, when a flag is added)", total, runFlagCount)
	}

	help := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"run"}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("run %q: exit %d\n%s", args, code, stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	short := help("--help")
	for _, g := range runFlagGroups {
		if heading := "\n" + g.title + ":\n"; strings.Contains(short, heading) == g.tuning {
			t.Errorf("run --help: heading %q shown %v, want %v", g.title, !g.tuning, g.tuning)
		}
	}
	if strings.Contains(short, "  --linger [CDC_RELAY_LINGER]") || !strings.Contains(short, "--help-all: --batch-max-bytes") {
		t.Errorf("run --help lists a tuning flag, or does not name them with --help-all:\n%s", short)
	}
	for _, args := range [][]string{{"--help-all"}, {"help-all"}, {"--slot", "s", "-help-all"}} {
		all := help(args...)
		if n := strings.Count(all, "\n  --"); n != runFlagCount {
			t.Errorf("run %q lists %d flags, want %d:\n%s", args, n, runFlagCount, all)
		}
		if !strings.Contains(all, "\nTuning:\n  --batch-max-bytes [CDC_RELAY_BATCH_MAX_BYTES]") {
			t.Errorf("run %q: no Tuning group:\n%s", args, all)
		}
	}
}

// --help-all has no environment twin: CDC_RELAY_HELP_ALL neither prints the help nor fails.
func TestHelpAllHasNoTwin(t *testing.T) {
	t.Setenv("CDC_RELAY_HELP_ALL", "garbage")
	t.Setenv("CDC_RELAY_PG_URL", "")
	if code := run([]string{"run"}, io.Discard, io.Discard); code != exitUsage {
		t.Errorf("run without flags and CDC_RELAY_HELP_ALL set: exit %d, want %d (the missing --pg-url)", code, exitUsage)
	}
}
