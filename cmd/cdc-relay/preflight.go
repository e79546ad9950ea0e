package main

import (
	"strings"

	"github.com/cdc-relay/cdc-relay/outbox"
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
