package oracle

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ledger commits ids 1, 2, 3 (keys a, b, a) and 5, 6 (b, a), and rolls back 4 (a). Row i's
// tag is 10*i.
func ledger() *Ledger {
	l := NewLedger()
	rows := func(ids []int64, keys ...string) []Row {
		var rs []Row
		for i, id := range ids {
			rs = append(rs, Row{ID: id, Key: keys[i], N: int(10 * id)})
		}
		return rs
	}
	l.Commit(rows([]int64{1, 2, 3}, "a", "b", "a"))
	l.Rollback(rows([]int64{4}, "a"))
	l.Commit(rows([]int64{5, 6}, "b", "a"))
	return l
}

func del(id int64, key string, p int32, off int64) Delivery {
	return Delivery{ID: id, Key: key, N: int(10 * id), Partition: p, Offset: off}
}

// Partition 0 holds key a, partition 1 key b; ids 1, 3 and 6 are delivered twice (replays).
var good = []Delivery{
	del(1, "a", 0, 0), del(3, "a", 0, 1), del(1, "a", 0, 2), del(3, "a", 0, 3), del(6, "a", 0, 4), del(6, "a", 0, 5),
	del(2, "b", 1, 0), del(5, "b", 1, 1),
}

func without(ds []Delivery, i int) []Delivery {
	return append(append([]Delivery{}, ds[:i]...), ds[i+1:]...)
}

// The verdict catches a lost row, a delivered rolled-back row, a per-key reordering of first
// deliveries and a row whose id came back with another row's payload, whatever order the
// partitions were read in, and accepts duplicates.
func TestCheck(t *testing.T) {
	reused := del(5, "b", 1, 1)
	reused.N = 999 // id 5 reused by a row this writer never committed (a failover lost the first)
	cases := []struct {
		name                         string
		ds                           []Delivery
		dups, lost, rolled, reorders int
	}{
		{"good", good, 3, 0, 0, 0},
		{"good, partitions read interleaved", []Delivery{good[6], good[0], good[1], good[7], good[2], good[3], good[4], good[5]}, 3, 0, 0, 0},
		{"lost", without(without(good, 5), 4), 2, 1, 0, 1},
		{"rolled back delivered", append(append([]Delivery{}, good...), del(4, "a", 0, 6)), 3, 0, 1, 0},
		{"reordered", []Delivery{del(3, "a", 0, 0), del(1, "a", 0, 1), del(6, "a", 0, 2), del(2, "b", 1, 0), del(5, "b", 1, 1)}, 0, 0, 0, 1},
		{"id reused by another row", append(without(good, 7), reused), 3, 1, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := ledger().Check(c.ds)
			if len(v.Duplicates) != c.dups || len(v.Lost) != c.lost || len(v.RolledBackSeen) != c.rolled || len(v.Reordered) != c.reorders {
				t.Errorf("duplicates %d lost %d rolled-back %d reordered keys %d, want %d %d %d %d (%v)",
					len(v.Duplicates), len(v.Lost), len(v.RolledBackSeen), len(v.Reordered), c.dups, c.lost, c.rolled, c.reorders, v.Reordered)
			}
			if v.OK() != (c.lost+c.rolled+c.reorders == 0) {
				t.Errorf("OK() = %v", v.OK())
			}
		})
	}
	v := ledger().Check(good)
	if got := fmt.Sprint(v.Duplicates[0].ID, v.Duplicates[1].ID, v.Duplicates[2].ID); got != "1 3 6" {
		t.Errorf("duplicates in offset order: ids %s, want 1 3 6", got)
	}
	if c := ledger().Counts(); c != (Counts{Rows: 5, Txs: 2, RolledBack: 1, RolledBackTxs: 1}) {
		t.Errorf("counts %+v", c)
	}
	if got := fmt.Sprint(ledger().Committed()); got != "[1 2 3 5 6]" {
		t.Errorf("Committed() = %s", got)
	}
}

// A record is read as its outbox-id header, key, payload tag and position; one without a
// numeric outbox id is an error, and a payload without a tag is another writer's row (-1).
func TestRead(t *testing.T) {
	at := time.Unix(1700000000, 0)
	r := &kgo.Record{Topic: "t", Key: []byte("k1"), Value: []byte(`{"n": 7, "k": "k1"}`), Partition: 2, Offset: 9, Timestamp: at,
		Headers: []kgo.RecordHeader{{Key: "outbox-table", Value: []byte("public.o")}, {Key: "outbox-id", Value: []byte("42")}}}
	d, err := Read(r)
	if err != nil || d != (Delivery{ID: 42, Key: "k1", N: 7, Partition: 2, Offset: 9, At: at}) {
		t.Errorf("Read = %+v, %v", d, err)
	}
	r.Value = []byte(`{"event": "order.created"}`)
	if d, err := Read(r); err != nil || d.N != -1 {
		t.Errorf("untagged payload: %+v, %v", d, err)
	}
	for _, id := range []string{"", "x", "0"} {
		r.Headers = []kgo.RecordHeader{{Key: "outbox-id", Value: []byte(id)}}
		if _, err := Read(r); err == nil {
			t.Errorf("outbox-id %q: no error", id)
		}
	}
}

// Seen counts a repeated id as a duplicate and answers which ids are missing.
func TestSeen(t *testing.T) {
	s := NewSeen()
	for _, id := range []int64{5, 3, 5, 9, 3, 5} {
		s.Add(id)
	}
	if s.Dups() != 3 || !s.Has(9) || s.Has(4) || s.Lowest() != 3 || s.Missing([]int64{3, 4, 5, 6}) != 2 {
		t.Errorf("dups %d has(9) %v has(4) %v lowest %d missing %d", s.Dups(), s.Has(9), s.Has(4), s.Lowest(), s.Missing([]int64{3, 4, 5, 6}))
	}
	if NewSeen().Lowest() != -1 {
		t.Error("empty Lowest() != -1")
	}
}
