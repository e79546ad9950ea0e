package main

import (
	"context"
	"errors"
	"flag"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// registerNullPayload registers --null-payload, which run and poll share.
func registerNullPayload(fs *flag.FlagSet, n *outbox.NullPayload) {
	*n = outbox.NullPayloadDeadLetter
	fs.Var(n, "null-payload", "what a row with a NULL payload becomes: dead-letter (a bad row) or tombstone (a record with a null value, which deletes its key from a compacted topic; docs/outbox.md)")
}

// checkPayloadTypes refuses a payload column of a type the relay does not publish (exit 2):
// its value would be that type's text, which no consumer expects. streamed are the tables
// whose rows the relay publishes; a table without the column is checkColumns' business.
func checkPayloadTypes(ctx context.Context, conn *pgx.Conn, streamed []string, column string) error {
	if len(streamed) == 0 {
		return nil
	}
	types, err := slotstore.New(conn).ColumnType(ctx, streamed, column)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range streamed {
		if typ, has := types[t]; has {
			if ok, _ := outbox.PayloadTypeName(typ); !ok {
				errs = append(errs, outbox.PayloadTypeError("column-payload", column, t, typ))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &usageError{err}
	}
	return nil
}
