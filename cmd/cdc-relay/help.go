package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// flagGroup is a heading of a command's --help and the flags under it, in the order shown.
// A tuning group is listed by name only, unless --help-all asks for every flag.
type flagGroup struct {
	title  string
	tuning bool
	names  []string
}

// runFlagGroups are run's flags by what they are about: what a first run needs comes first,
// and the tuning (intervals, timeouts, buffers) only with --help-all.
var runFlagGroups = []flagGroup{
	{title: "Connection", names: []string{"pg-url", "pg-password-file", "slot", "publication", "shard", "table", "message-prefix"}},
	{title: "Kafka", names: []string{"brokers", "dlq-topic", "topic", "topic-template", "create-topics", "topic-partitions", "topic-replication-factor",
		"format", "ce-source", "kafka-client-id"}},
	{title: "Security", names: []string{"kafka-tls", "kafka-ca-file", "kafka-cert-file", "kafka-key-file", "kafka-tls-insecure-skip-verify",
		"kafka-sasl-mechanism", "kafka-user", "kafka-password", "kafka-password-file"}},
	{title: "Values and schemas", names: []string{"value-format", "registry-url", "registry-user", "registry-password-file", "registry-ca-file",
		"registry-cert-file", "registry-key-file", "registry-tls-insecure-skip-verify", "subject-strategy", "register-schemas", "schema-file",
		"protobuf-message", "compression"}},
	{title: "Columns", names: []string{"profile", "column-id", "column-aggregate-id", "column-topic", "column-payload", "column-event-type", "column-headers", "null-payload"}},
	{title: "Delivery", names: []string{"delivery", "transactional-id", "checkpoint-topic", "dead-letter-table", "stop-at-lsn"}},
	{title: "Operations", names: []string{"metrics-addr", "log-format", "log-level", "wal-retained-warn-bytes"}},
	{title: "Tuning", tuning: true, names: []string{"batch-max-bytes", "max-buffered-records", "max-buffered-bytes", "linger",
		"status-interval", "confirm-delay", "receive-timeout", "slot-status-interval", "transaction-interval", "transaction-max-records",
		"pg-timeout", "kafka-timeout", "shutdown-timeout"}},
}

// helpAllFlag is the flag, and the word, that asks for every flag, the tuning ones included.
const helpAllFlag = "help-all"

// helpLayout is the --help-all flag of a command whose help is grouped: its value says
// whether every flag is to be listed.
type helpLayout struct {
	groups []flagGroup
	all    bool
}

func (h *helpLayout) String() string   { return "" }
func (h *helpLayout) Set(string) error { h.all = true; return nil }
func (h *helpLayout) IsBoolFlag() bool { return true }
func (h *helpLayout) Get() any         { return h.all }
func (h *helpLayout) wanted(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--" + helpAllFlag, "-" + helpAllFlag, helpAllFlag:
			return true
		}
	}
	return false
}

// groupFlags makes fs's --help list its flags under groups' headings, the tuning groups by
// name only, and adds --help-all (or the word help-all) for every flag. Call it after every
// flag is registered; a flag in no group is listed under "Other".
func groupFlags(fs *flag.FlagSet, groups []flagGroup) {
	h := &helpLayout{groups: groups}
	flat := fs.Usage
	fs.Var(h, helpAllFlag, "list every flag, the tuning ones included")
	fs.Usage = func() {
		var head strings.Builder
		out := fs.Output()
		fs.SetOutput(&head)
		flat() // for its first lines: the synopsis and the heading of the flags
		fs.SetOutput(out)
		top, _, _ := strings.Cut(head.String(), flagsHeading)
		fmt.Fprint(out, top+flagsHeading)
		printGroups(out, fs, h)
	}
}

// flagsHeading ends the synopsis of every command's --help.
const flagsHeading = "\nFlags (environment twin in brackets):\n"

func printGroups(w io.Writer, fs *flag.FlagSet, h *helpLayout) {
	listed := map[string]bool{helpAllFlag: true}
	var hidden []string
	for _, g := range h.groups {
		if g.tuning && !h.all {
			for _, n := range g.names {
				listed[n] = true
				hidden = append(hidden, "--"+n)
			}
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, n := range g.names {
			if f := fs.Lookup(n); f != nil {
				listed[n] = true
				printFlag(w, f)
			}
		}
	}
	var other []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !listed[f.Name] {
			other = append(other, f)
		}
	})
	if len(other) > 0 {
		fmt.Fprintf(w, "\nOther:\n")
		for _, f := range other {
			printFlag(w, f)
		}
	}
	if len(hidden) > 0 {
		fmt.Fprintf(w, "\nTuning, shown by --%s: %s\n", helpAllFlag, strings.Join(hidden, ", "))
	}
}

// printFlag prints one flag of a --help: its name, its environment twin, its help and default.
func printFlag(w io.Writer, f *flag.Flag) {
	def := ""
	if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
		def = fmt.Sprintf(" (default %s)", f.DefValue)
	}
	fmt.Fprintf(w, "  --%s [%s]\n      %s%s\n", f.Name, envName(f.Name), f.Usage, def)
}
