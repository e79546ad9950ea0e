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
	{"run"}, {"poll"}, {"slot", "create"}, {"slot", "status"}, {"slot", "drop"}, {"slot", "reshard"},
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
	groupLine  = regexp.MustCompile(`^(\S.*):$`)
)

func renderConfigDoc(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(`# Configuration reference

<!-- Generated from each command's --help by ` + "`go generate ./cmd/cdc-relay`" + ` (cmd/cdc-relay/configdoc_test.go);
a test fails when this file is stale. Edit the flags' help in cmd/cdc-relay, not this file. -->

Every flag has an environment twin ` + "`CDC_RELAY_<FLAG>`" + ` (upper case, dashes as underscores:
` + "`--pg-url` is `CDC_RELAY_PG_URL`" + `); a flag on the command line wins over its twin, even over a twin that
does not parse. A twin set but empty for a number, duration or switch is refused (unset it for the default).
` + "`cdc-relay COMMAND --help`" + ` prints the same lists (` + "`run --help`" + ` leaves the tuning flags out; ` + "`run --help-all`" + ` lists them).

Values: a duration is a number with a unit, ` + "`500ms`, `10s`, `2m`, `1h30m`" + `, or days, ` + "`7d`, `1d12h`" + `,
for every duration flag as for ` + "`dead-letters --since`" + `; a number without a unit is refused. A count or size is
written out in digits (` + "`1e12`" + ` is refused). A value that does not parse is refused naming the flag or twin,
the value and the form expected.

A publication that publishes more than inserts (` + "`publish = 'insert, update, delete, truncate'`" + `, the default of
` + "`CREATE PUBLICATION`" + `) is accepted: ` + "`run`" + ` logs a warning at start naming the operations it ignores (the
server sends them, the relay decodes and drops them) and the fix, ` + "`ALTER PUBLICATION name SET (publish = 'insert')`" + `.
` + "`slot create`" + ` leaves an existing publication's publish option as it is (another consumer may need it) and
prints the same note.

Exit codes:

- ` + "`0`" + `: a clean shutdown (SIGTERM or Ctrl-C, also while waiting for a service at start), or ` + "`--help`" + `.
- ` + "`1`" + `: a runtime failure: what retrying cannot fix once started (the slot lost or taken over, a record Kafka
  refuses for good, an exactly-once producer fenced), and at start PostgreSQL refusing the password or the user,
  a database that does not exist, or a TLS verification or SASL authentication (PostgreSQL's or Kafka's) that
  failed. A service that cannot be reached, or that is starting or restarting, is waited for, not an exit.
- ` + "`2`" + `: bad usage or configuration, found at start, before anything streams; the message names the flag or
  twin, what is wrong and what to do: an unknown flag; a value that does not parse; a zero or negative interval,
  timeout or buffer size; a ` + "`--max-buffered-bytes`" + ` above the memory the process may use; a ` + "`--pg-url`" + ` that is
  not PostgreSQL's (a JDBC URL, another scheme, no scheme, a password not percent-encoded); a ` + "`--brokers`" + ` entry
  with a listener's scheme (` + "`PLAINTEXT://`" + `) or where something that is not Kafka answers (PostgreSQL, HTTP); a
  topic name Kafka refuses; ` + "`--column-topic`" + ` with ` + "`--topic`" + `; a ` + "`--transactional-id`" + ` with spaces; a
  ` + "`--metrics-addr`" + ` that is not host:port or cannot be listened on; wal_level not logical; a missing slot or
  publication; a ` + "`--table`" + ` no publication streams; a mapped column no streamed table has; a dead-letter topic
  that does not exist.
`)
	for _, c := range configDocCommands {
		var stdout, stderr bytes.Buffer
		help := "--help"
		if c[0] == "run" {
			help = "--" + helpAllFlag // run's --help leaves the tuning flags out
		}
		if code := run(append(append([]string{}, c...), help), &stdout, &stderr); code != 0 {
			t.Fatalf("cdc-relay %s --help: exit %d\n%s%s", strings.Join(c, " "), code, stdout.String(), stderr.String())
		}
		out := stdout.String() + stderr.String()
		usage, flags, ok := strings.Cut(out, flagsHeading)
		if !ok {
			t.Fatalf("cdc-relay %s --help: no flag list in\n%s", strings.Join(c, " "), out)
		}
		fmt.Fprintf(&b, "\n## `cdc-relay %s`\n\n```\n%s\n```\n", strings.Join(c, " "), strings.TrimSpace(usage))
		const tableHead = "| flag | environment | default | meaning |\n|---|---|---|---|\n"
		lines := strings.Split(strings.Trim(flags, "\n"), "\n")
		if len(lines) > 0 && groupLine.MatchString(lines[0]) {
			b.WriteString("\nThe flags by group, as `--help` shows them (`--help-all` lists the tuning ones too).\n")
		} else {
			b.WriteString("\n" + tableHead)
		}
		for i := 0; i < len(lines); i++ {
			if lines[i] == "" {
				continue
			}
			if g := groupLine.FindStringSubmatch(lines[i]); g != nil {
				fmt.Fprintf(&b, "\n### %s\n\n%s", g[1], tableHead)
				continue
			}
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
		b.WriteString("\n")
	}
	b.WriteString(configDocShapes)
	b.WriteString(configDocValues)
	return b.Bytes()
}
