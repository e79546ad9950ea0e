package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/configuration.md from the commands' --help")

// configDocCommands are the commands docs/configuration.md describes, in its order.
var configDocCommands = [][]string{
	{"run"}, {"poll"}, {"slot", "create"}, {"slot", "status"}, {"slot", "drop"},
	{"cutover"}, {"outbox", "mark-published"}, {"outbox", "prune"},
	{"dead-letters", "list"}, {"dead-letters", "show"}, {"dead-letters", "replay"}, {"dead-letters", "discard"},
}

const configDocPath = "../../docs/configuration.md"

// TestConfigurationReferenceIsCurrent fails when docs/configuration.md is not what the
// commands' --help says today. Regenerate it with
//
//	go generate ./cmd/cdc-relay
//
// (which runs this test with -update).
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	got := renderConfigDoc(t)
	if *updateDocs {
		if err := os.WriteFile(configDocPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatalf("%v: run `go generate ./cmd/cdc-relay` to write it", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/configuration.md is stale (a flag was added, removed or reworded): run `go generate ./cmd/cdc-relay` and commit the result")
	}
}

var (
	flagLine   = regexp.MustCompile(`^  --(\S+) \[(\S+)\]$`)
	defaultEnd = regexp.MustCompile(` \(default (.*)\)$`)
)

func renderConfigDoc(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(`# Configuration reference

<!-- Generated from each command's --help by ` + "`go generate ./cmd/cdc-relay`" + ` (cmd/cdc-relay/configdoc_test.go);
a test fails when this file is stale. Edit the flags' help in cmd/cdc-relay, not this file. -->

Every flag has an environment twin ` + "`CDC_RELAY_<FLAG>`" + ` (upper case, dashes as underscores:
` + "`--pg-url` is `CDC_RELAY_PG_URL`" + `); a flag on the command line wins over its twin.
Exit codes: ` + "`0`" + ` clean shutdown, ` + "`1`" + ` runtime failure (a service unreachable, the slot lost),
` + "`2`" + ` bad usage or configuration, found at start (the message names the flag: an unknown flag, a bad URL,
a zero or negative interval, timeout or buffer size, a topic name Kafka refuses, a mapped column no
streamed table has, a dead-letter topic that does not exist, a missing slot or publication). ` + "`cdc-relay COMMAND --help`" + ` prints
the same lists.
`)
	for _, c := range configDocCommands {
		var stdout, stderr bytes.Buffer
		if code := run(append(append([]string{}, c...), "--help"), &stdout, &stderr); code != 0 {
			t.Fatalf("cdc-relay %s --help: exit %d\n%s%s", strings.Join(c, " "), code, stdout.String(), stderr.String())
		}
		help := stdout.String() + stderr.String()
		usage, flags, ok := strings.Cut(help, "\nFlags (environment twin in brackets):\n")
		if !ok {
			t.Fatalf("cdc-relay %s --help: no flag list in\n%s", strings.Join(c, " "), help)
		}
		fmt.Fprintf(&b, "\n## `cdc-relay %s`\n\n```\n%s\n```\n\n", strings.Join(c, " "), strings.TrimSpace(usage))
		b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
		lines := strings.Split(strings.TrimRight(flags, "\n"), "\n")
		for i := 0; i < len(lines); i++ {
			m := flagLine.FindStringSubmatch(lines[i])
			if m == nil || i+1 == len(lines) {
				t.Fatalf("cdc-relay %s --help: unexpected line %q", strings.Join(c, " "), lines[i])
			}
			i++
			desc, def := strings.TrimSpace(lines[i]), ""
			if d := defaultEnd.FindStringSubmatch(desc); d != nil {
				desc, def = strings.TrimSuffix(desc, d[0]), "`"+d[1]+"`"
			}
			desc = strings.ReplaceAll(desc, "|", `\|`)
			fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s |\n", m[1], m[2], def, desc)
		}
	}
	b.WriteString(configDocValues)
	return b.Bytes()
}
