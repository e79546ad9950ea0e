package oracle_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/testkit/oracle"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// commitLost is a connection whose COMMIT fails with the outcome unknown to the client: the
// server committed (committed true) or not, and the client heard an error either way.
type commitLost struct {
	oracle.Beginner
	committed bool
}

func (c commitLost) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := c.Beginner.Begin(ctx)
	return lostTx{tx, c.committed}, err
}

type lostTx struct {
	pgx.Tx
	committed bool
}

func (t lostTx) Commit(ctx context.Context) error {
	if t.committed {
		_ = t.Tx.Commit(ctx)
	} else {
		_ = t.Tx.Rollback(ctx)
	}
	return errors.New("unexpected EOF")
}

// The Writer records exactly what PostgreSQL committed: committed and rolled-back
// transactions, and a COMMIT whose answer was lost, resolved by looking its ids up, both
// ways. A perfect delivery of the table's rows (read back as the relay would carry them) is
// then a clean verdict, and each row's tag is in its payload.
func TestWriterRecordsWhatCommitted(t *testing.T) {
	f := testenv.NewFixture(t)
	ctx := context.Background()
	w := oracle.NewWriter(f.Table, f.Topic, f.Pool)
	steps := []struct {
		db        oracle.Beginner
		keys      []string
		rollback  bool
		committed bool
	}{
		{f.Pool, []string{"a", "b", "a"}, false, true},
		{f.Pool, []string{"a"}, true, false},
		{commitLost{f.Pool, true}, []string{"b", "a"}, false, true},
		{commitLost{f.Pool, false}, []string{"a", "a"}, false, false},
		{f.Pool, []string{"b"}, false, true},
	}
	for i, s := range steps {
		ok, err := w.Tx(ctx, s.db, s.keys, s.rollback)
		if ok != s.committed {
			t.Fatalf("step %d: committed %v (%v), want %v", i, ok, err, s.committed)
		}
	}
	if c := w.Counts(); c != (oracle.Counts{Rows: 6, Txs: 3, RolledBack: 3, RolledBackTxs: 2, Ambiguous: 2}) {
		t.Errorf("counts %+v", c)
	}
	rows, err := f.Pool.Query(ctx, `SELECT id, aggregate_id, (payload->>'n')::int FROM `+f.Table+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var ds []oracle.Delivery
	for rows.Next() {
		var d oracle.Delivery
		if err := rows.Scan(&d.ID, &d.Key, &d.N); err != nil {
			t.Fatal(err)
		}
		d.Offset = int64(len(ds))
		ds = append(ds, d)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if v := w.Check(ds); !v.OK() || len(ds) != 6 {
		t.Errorf("%d rows in the table, verdict %+v", len(ds), v)
	}
	// Any one of them missing is a loss.
	if v := w.Check(ds[1:]); len(v.Lost) != 1 || v.Lost[0].ID != ds[0].ID {
		t.Errorf("without id %d: lost %+v", ds[0].ID, v.Lost)
	}
}
