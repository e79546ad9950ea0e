package slotstore

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// Ignored returns the operations the publication publishes besides insert (update, delete,
// truncate, as pg_publication names them): the relay publishes outbox inserts only, so the
// server sends these and the relay decodes and drops them. Nil for an insert-only publication.
func (p *PublicationStatus) Ignored() []string {
	var ops []string
	for _, op := range strings.Split(p.Publish, ",") {
		if op = strings.TrimSpace(op); op != "" && op != "insert" {
			ops = append(ops, op)
		}
	}
	return ops
}

// InsertOnlySQL is the statement that makes the publication publish inserts only.
func (p *PublicationStatus) InsertOnlySQL() string {
	return "ALTER PUBLICATION " + pgx.Identifier{p.Name}.Sanitize() + " SET (publish = 'insert')"
}
