package slotstore

import (
	"context"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// Timeline returns the server's current timeline, by IDENTIFY_SYSTEM over a replication
// connection (the stream asks it the same way) made from cfg, which is not changed: above 1,
// the server was promoted at some point. timeout bounds the connection and the command.
// Store works over a normal connection, where IDENTIFY_SYSTEM is not accepted: hence a
// function of its own, which opens and closes its connection.
func Timeline(ctx context.Context, cfg *pgconn.Config, timeout time.Duration) (int32, error) {
	rc := cfg.Copy()
	rc.RuntimeParams["replication"] = "database"
	if _, ok := rc.RuntimeParams["application_name"]; !ok {
		rc.RuntimeParams["application_name"] = "cdc-relay"
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgconn.ConnectConfig(cctx, rc)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	sys, err := pglogrepl.IdentifySystem(cctx, conn)
	if err != nil {
		return 0, err
	}
	return sys.Timeline, nil
}
