package main

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// profileRun parses args as run's column, topic and profile flags and applies the profile.
func profileRun(t *testing.T, args ...string) (decoder.Config, error) {
	t.Helper()
	var dcfg decoder.Config
	var p profileFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&dcfg.Topic, "topic", "", "")
	registerColumns(fs, &dcfg.Columns)
	p.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	err := p.apply(fs, &dcfg)
	return dcfg, err
}

func TestProfileDebeziumSetsEventRoutersDefaults(t *testing.T) {
	dcfg, err := profileRun(t, "--profile", "debezium")
	if err != nil {
		t.Fatal(err)
	}
	want := decoder.Config{Columns: outbox.Columns{ID: "id", AggregateID: "aggregateid", Topic: "aggregatetype", Payload: "payload",
		EventType: "type", Headers: "headers"}, TopicTemplate: "outbox.event.${aggregatetype}", IDHeader: "id", NullPayload: outbox.NullPayloadTombstone}
	if !reflect.DeepEqual(dcfg, want) {
		t.Fatalf("config = %+v\nwant     %+v", dcfg, want)
	}
	if err := dcfg.Validate(); err != nil {
		t.Fatalf("the profile's decoder config is invalid: %v", err)
	}
}

func TestExplicitFlagsOverrideTheProfile(t *testing.T) {
	dcfg, err := profileRun(t, "--profile", "debezium", "--column-aggregate-id", "key", "--topic-template", "events.${type}")
	if err != nil {
		t.Fatal(err)
	}
	if dcfg.Columns.AggregateID != "key" || dcfg.TopicTemplate != "events.${type}" || dcfg.Columns.ID != "id" {
		t.Fatalf("config = %+v, want aggregate id column key, template events.${type}, the profile's id", dcfg)
	}
	dcfg, err = profileRun(t, "--profile", "debezium", "--topic", "all")
	if err != nil || dcfg.TopicTemplate != "" || dcfg.Topic != "all" {
		t.Fatalf("with --topic: config = %+v, err %v; want the fixed topic and no template", dcfg, err)
	}
	dcfg, err = profileRun(t, "--profile", "debezium", "--column-topic", "dest")
	if err != nil || dcfg.TopicTemplate != "" || dcfg.Columns.Topic != "dest" {
		t.Fatalf("with --column-topic: config = %+v, err %v; want the topic column dest and no template", dcfg, err)
	}
}

func TestBadProfileFlagsAreUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile", "kafka-connect"}, `--profile "kafka-connect": unknown profile; use one of: debezium`},
		{[]string{"--topic-template", "a.${b}", "--topic", "t"}, "--topic-template and --topic are exclusive"},
		{[]string{"--topic-template", "a.${b"}, `without a closing "}"`},
		{[]string{"--topic-template", "fixed"}, "no ${column} placeholder"},
	} {
		_, err := profileRun(t, c.args...)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want a usage error containing %q", c.args, err, c.want)
		}
	}
}

func TestTemplateColumnMissingFromTheTableIsAUsageError(t *testing.T) {
	have := map[string][]string{"public.outbox": {"id", "aggregateid", "payload"}}
	err := checkTemplateColumns(have, []string{"public.outbox"}, "outbox.event.${aggregatetype}")
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `has a column "aggregatetype"`) {
		t.Fatalf("err = %v, want a usage error naming aggregatetype", err)
	}
	have["public.outbox"] = append(have["public.outbox"], "aggregatetype")
	if err := checkTemplateColumns(have, []string{"public.outbox"}, "outbox.event.${aggregatetype}"); err != nil {
		t.Fatalf("err = %v with the column present", err)
	}
}

func TestAColumnCheckUnderTheProfileSaysTheProfileChoseTheNames(t *testing.T) {
	p := profileFlags{name: "debezium"}
	err := p.explain(usageErr(`--column-aggregate-id aggregateid: no table has a column "aggregateid"`))
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `no table has a column "aggregateid" (--profile debezium reads debezium's columns id, aggregatetype, aggregateid, type and payload`) {
		t.Fatalf("err = %v, want a usage error that names the profile's columns", err)
	}
	if err := (&profileFlags{}).explain(usageErr("x")); err.Error() != "x" {
		t.Fatalf("without a profile: %v, want the error unchanged", err)
	}
}
