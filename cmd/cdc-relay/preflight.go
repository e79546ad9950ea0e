package main

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// checkTables refuses a --table that no publication streams: its rows would never arrive,
// and the relay would run happily publishing nothing (exit 2).
func checkTables(tables, published, pubs []string) error {
	in := make(map[string]bool, len(published))
	for _, t := range published {
		in[t] = true
	}
	for _, t := range tables {
		tb, err := outbox.ParseTable(t)
		if err != nil {
			return usageErr("--table: %w", err)
		}
		if q := tb.String(); !in[q] {
			return usageErr("--table %s is not in publication %s, so its rows would never reach the relay: "+
				"add it with `cdc-relay slot create --publication %s --table %s` (or ALTER PUBLICATION %s ADD TABLE %s), or fix --table",
				q, strings.Join(pubs, ","), pubs[0], q, pubs[0], q)
		}
	}
	return nil
}

// checkColumns refuses a column mapping that no streamed table has (exit 2): every row would
// become a dead letter, found row by row instead of at start. streamed are the tables whose rows
// the relay publishes (schema.table), have their columns. The topic column is not needed with a
// fixed --topic; the optional columns (event type, headers) only when their flag was given.
// A table that lacks a column another streamed table has is left alone: a publication may hold
// tables of different shapes, and each bad row is dead-lettered with its reason.
func checkColumns(have map[string][]string, streamed []string, m outbox.Columns, fixedTopic string, given func(string) bool) error {
	if len(streamed) == 0 {
		return nil // logical messages only
	}
	check := []struct{ flag, col string }{{"column-id", m.ID}, {"column-aggregate-id", m.AggregateID}, {"column-payload", m.Payload}}
	if fixedTopic == "" {
		check = append(check, struct{ flag, col string }{"column-topic", m.Topic})
	}
	for _, opt := range []struct{ flag, col string }{{"column-event-type", m.EventType}, {"column-headers", m.Headers}} {
		if given(opt.flag) && opt.col != "" {
			check = append(check, opt)
		}
	}
	var errs []error
	for _, c := range check {
		found := false
		for _, t := range streamed {
			found = found || slices.Contains(have[t], c.col)
		}
		if !found {
			t := streamed[0]
			errs = append(errs, fmt.Errorf("--%s %s: no table the relay streams (%s) has a column %q, so every row would be dead-lettered: "+
				"name one of %s's columns (%s)", c.flag, c.col, strings.Join(streamed, ", "), c.col, t, strings.Join(have[t], ", ")))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &usageError{err}
	}
	return nil
}

// warnPublishesMore says, once at start, that the publication publishes operations the relay
// ignores (it publishes outbox inserts only): the server sends them and the relay decodes and
// drops them, which costs work and may surprise. Accepted, not refused: another consumer may
// need them.
func warnPublishesMore(log *slog.Logger, p *slotstore.PublicationStatus) {
	if ignored := p.Ignored(); len(ignored) > 0 {
		log.Warn("the publication publishes operations the relay ignores (it publishes inserts only): "+
			"they are decoded and dropped; unless another consumer needs them, run "+p.InsertOnlySQL(),
			"publication", p.Name, "ignored", strings.Join(ignored, ", "))
	}
}
