package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// profileFlags are --profile and --topic-template: a profile publishes another publisher's
// outbox table record for record (docs/debezium.md); explicit flags override what it sets.
type profileFlags struct {
	name     string
	template string
}

func (p *profileFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.name, "profile", "", "publish the records another outbox publisher writes: debezium (Debezium's Outbox Event Router with its defaults, on its default table: docs/debezium.md); explicit --column-* and --topic flags override it")
	fs.StringVar(&p.template, "topic-template", "", "name each record's topic from its row, e.g. outbox.event.${aggregatetype}: each ${column} is that column's text (instead of the topic column; not with --topic)")
}

// apply sets dcfg from the profile and --topic-template, once the flags are parsed.
func (p *profileFlags) apply(fs *flag.FlagSet, dcfg *decoder.Config) error {
	if p.template != "" && dcfg.Topic != "" {
		return usageErr("--topic-template and --topic are exclusive: a template names each row's topic, --topic one topic for every row")
	}
	if p.template != "" {
		if _, err := outbox.ParseTopicTemplate(p.template); err != nil {
			return &usageError{fmt.Errorf("--topic-template: %w", err)}
		}
	}
	if p.name != "" {
		prof, ok := outbox.Profiles[p.name]
		if !ok {
			return usageErr("--profile %q: unknown profile; use one of: %s", p.name, strings.Join(slices.Sorted(maps.Keys(outbox.Profiles)), ", "))
		}
		for _, c := range []struct {
			flag     string
			dst      *string
			fromProf string
		}{
			{"column-id", &dcfg.Columns.ID, prof.Columns.ID},
			{"column-aggregate-id", &dcfg.Columns.AggregateID, prof.Columns.AggregateID},
			{"column-topic", &dcfg.Columns.Topic, prof.Columns.Topic},
			{"column-payload", &dcfg.Columns.Payload, prof.Columns.Payload},
			{"column-event-type", &dcfg.Columns.EventType, prof.Columns.EventType},
			{"column-headers", &dcfg.Columns.Headers, prof.Columns.Headers},
		} {
			if c.fromProf != "" && !isSet(fs, c.flag) {
				*c.dst = c.fromProf
			}
		}
		// An explicit --topic or --column-topic names the topic; otherwise the profile's template does.
		if p.template == "" && dcfg.Topic == "" && !isSet(fs, "column-topic") {
			dcfg.TopicTemplate = prof.TopicTemplate
		}
		dcfg.IDHeader = prof.IDHeader
		if prof.NullPayloadTombstone && !isSet(fs, "null-payload") {
			dcfg.NullPayload = outbox.NullPayloadTombstone
		}
	}
	if p.template != "" {
		dcfg.TopicTemplate = p.template
	}
	return nil
}

// checkTemplateColumns refuses a topic template that names a column no streamed table has:
// every row would be dead-lettered.
func checkTemplateColumns(have map[string][]string, streamed []string, template string) error {
	if template == "" || len(streamed) == 0 {
		return nil
	}
	t, _ := outbox.ParseTopicTemplate(template) // checked by apply
	var errs []error
	for _, col := range t.Columns() {
		found := false
		for _, tb := range streamed {
			found = found || slices.Contains(have[tb], col)
		}
		if !found {
			errs = append(errs, fmt.Errorf("topic template %q: no table the relay streams (%s) has a column %q, so every row would be dead-lettered: "+
				"name one of %s's columns (%s)", template, strings.Join(streamed, ", "), col, streamed[0], strings.Join(have[streamed[0]], ", ")))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &usageError{err}
	}
	return nil
}

// explain adds to a column check's usage error that the profile chose the column names, so
// that the operator knows the flags to give for a table that names them otherwise.
func (p *profileFlags) explain(err error) error {
	var ue *usageError
	if err == nil || p.name == "" || !errors.As(err, &ue) {
		return err
	}
	prof := outbox.Profiles[p.name]
	c := prof.Columns
	return usageErr("%w (--profile %s reads %s's columns %s, %s, %s, %s and %s: give --column-* or --topic-template for a table that names them otherwise)",
		ue.err, p.name, p.name, c.ID, c.Topic, c.AggregateID, c.EventType, c.Payload)
}
