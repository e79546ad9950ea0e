package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/internal/contract"
	"github.com/cdc-relay/cdc-relay/testkit/oracle"
)

// The soak's figures are testkit/oracle's verdict (its own tests pin the contract), and each
// duplicate is blamed on the last fault before it was produced.
func TestCheck(t *testing.T) {
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	newW := func() *writer {
		w := &writer{Writer: oracle.NewWriter("public.t", "t", nil)}
		w.Commit([]oracle.Row{{ID: 1, Key: "a", N: 0}, {ID: 2, Key: "b", N: 1}, {ID: 3, Key: "a", N: 2}})
		w.Rollback([]oracle.Row{{ID: 4, Key: "a", N: 3}})
		w.Commit([]oracle.Row{{ID: 5, Key: "b", N: 4}, {ID: 6, Key: "a", N: 5}})
		return w
	}
	events := func() []Event {
		return []Event{{Kind: "kill", N: 1, At: at(10)}, {Kind: "pg-restart", At: at(20)}, {Kind: "kill", N: 2, At: at(30)}}
	}
	tags := map[int64]int{1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5}
	d := func(id int64, key string, p int32, off int64, s int) oracle.Delivery {
		return oracle.Delivery{ID: id, Key: key, N: tags[id], Partition: p, Offset: off, At: at(s)}
	}
	// Partition 0 holds key a, partition 1 key b. Replays after kill 1 (ids 1, 3) and kill 2 (6).
	good := []oracle.Delivery{
		d(1, "a", 0, 0, 1), d(3, "a", 0, 1, 2), d(1, "a", 0, 2, 11), d(3, "a", 0, 3, 12), d(6, "a", 0, 4, 25), d(6, "a", 0, 5, 31),
		d(2, "b", 1, 0, 1), d(5, "b", 1, 1, 22),
	}
	bad := append(append([]oracle.Delivery{}, good[:4]...), good[6:]...) // id 6 never arrives
	bad = append(bad, d(4, "a", 0, 6, 40))                               // a rolled-back row does
	v := &verifier{recs: bad, dead: 1}
	res := &Result{Events: events()}
	v.check(newW(), res)
	if res.Lost != 1 || res.RolledBackSeen != 1 || res.OrderViolations != 1 || res.DeadLettered != 1 || !strings.Contains(res.FirstOrderProblem, "key a") {
		t.Errorf("lost %d rolled-back %d reordered keys %d dead letters %d (%s), want 1 1 1 1 (key a)",
			res.Lost, res.RolledBackSeen, res.OrderViolations, res.DeadLettered, res.FirstOrderProblem)
	}
	if err := res.Err(); err == nil || !strings.Contains(err.Error(), "1 committed rows lost") {
		t.Errorf("Err() = %v", err)
	}

	v = &verifier{recs: good}
	res = &Result{Events: events()}
	v.check(newW(), res)
	if res.Err() != nil {
		t.Errorf("Err() = %v", res.Err())
	}
	if res.Duplicates != 3 || res.Events[0].Dups != 2 || res.Events[1].Dups != 0 || res.Events[2].Dups != 1 {
		t.Errorf("duplicates %d, per event %+v", res.Duplicates, res.Events)
	}
	if res.MaxDupsOneCrash != 2 || res.MaxDupsCrash != 1 {
		t.Errorf("largest from one crash %d (kill #%d), want 2 (kill #1)", res.MaxDupsOneCrash, res.MaxDupsCrash)
	}
	if res.Committed != 5 || res.RolledBack != 1 || res.CommittedTxs != 2 || res.RolledBackTxs != 1 || res.Records != 8 {
		t.Errorf("counts %+v", res)
	}
	var out strings.Builder
	res.Print(&out)
	if want := "by fault:   " + res.dupsByFault(); !strings.Contains(out.String(), want) {
		t.Errorf("Print lacks %q:\n%s", want, out.String())
	}
}

// The kills' duplicates are summed apart from the other faults', with their mean per kill.
func TestDupsByFault(t *testing.T) {
	r := &Result{Events: []Event{{Kind: "kill", Dups: 10}, {Kind: "kafka-pause", Dups: 500}, {Kind: "kill", Dups: 30}, {Kind: "pg-restart", Dups: 7}}}
	if got, want := r.dupsByFault(), "2 kills 40 (20 per kill), kafka-pause 500, pg-restart 7"; got != want {
		t.Errorf("dupsByFault() = %q, want %q", got, want)
	}
	if got := (&Result{}).dupsByFault(); got != "no kill" {
		t.Errorf("no events: %q", got)
	}
}

// The markers' reader sorts each producer's records by the marker that ended its transaction:
// an abort's records are the aborted ones (whatever other producers interleaved), a commit's
// are not, and a transaction whose marker has not come is open.
func TestMarkersSortRecordsByTheirTransactionsMarker(t *testing.T) {
	txnAttrs := kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true})
	ctlAttrs := kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})
	var off int64
	rec := func(pid, id int64) *kgo.Record {
		off++
		return &kgo.Record{Partition: 0, Offset: off, ProducerID: pid, Attrs: txnAttrs, Key: []byte("k"),
			Value: fmt.Appendf(nil, `{"n": %d}`, id), Headers: []kgo.RecordHeader{{Key: contract.OutboxID, Value: fmt.Appendf(nil, "%d", id)}}}
	}
	marker := func(pid int64, typ kmsg.ControlRecordKeyType) *kgo.Record {
		off++
		key := (&kmsg.ControlRecordKey{Type: typ}).AppendTo(nil)
		return &kgo.Record{Partition: 0, Offset: off, ProducerID: pid, Attrs: ctlAttrs, Key: key}
	}
	m := newMarkers()
	for _, r := range []*kgo.Record{
		rec(1, 10), rec(1, 11), rec(2, 20), marker(1, kmsg.ControlRecordKeyTypeAbort), // 10, 11 aborted
		rec(1, 10), marker(2, kmsg.ControlRecordKeyTypeCommit), marker(1, kmsg.ControlRecordKeyTypeCommit), // 20, 10 committed
		rec(1, 12), // open
	} {
		m.add(r)
	}
	// The last record's transaction is open: a fault now leaves it aborted (awaitOpen).
	if n := m.lastOpen(); n != 1 {
		t.Errorf("the last record's open transaction holds %d records, want 1", n)
	}
	committed := []oracle.Delivery{{ID: 20, Partition: 0, Offset: 3}, {ID: 10, Partition: 0, Offset: 5}}
	var res Result
	m.tally(committed, &res)
	if res.Aborted != 2 || res.AbortedDelivered != 1 || res.AbortedSeen != 0 || res.OpenAtEnd != 1 || m.committed != 2 {
		t.Errorf("aborted %d (delivered later %d, seen %d), open %d, committed %d; want 2 (1, 0), 1, 2",
			res.Aborted, res.AbortedDelivered, res.AbortedSeen, res.OpenAtEnd, m.committed)
	}
	// A read_committed reader that returned an aborted record (offset 1, id 10) is caught.
	res = Result{}
	m.tally(append(committed, oracle.Delivery{ID: 10, Partition: 0, Offset: 1}), &res)
	if res.AbortedSeen != 1 {
		t.Errorf("aborted records seen %d, want 1", res.AbortedSeen)
	}
	// Once its marker is read, the last record's transaction is no longer open, whatever
	// another producer holds open.
	m.add(rec(3, 30))
	m.add(rec(1, 13))
	m.add(marker(1, kmsg.ControlRecordKeyTypeCommit))
	if n := m.lastOpen(); n != 0 {
		t.Errorf("after its commit marker the last record's transaction holds %d records, want 0", n)
	}
}

// Exactly-once fails on one duplicate, on an aborted record read and on a record written
// outside a transaction; at-least-once allows and counts duplicates.
func TestExactlyOnceVerdictFailsOnOneDuplicate(t *testing.T) {
	w := &writer{Writer: oracle.NewWriter("public.t", "t", nil)}
	w.Commit([]oracle.Row{{ID: 1, Key: "a", N: 0}, {ID: 2, Key: "a", N: 1}})
	recs := []oracle.Delivery{{ID: 1, Key: "a", N: 0, Offset: 0}, {ID: 2, Key: "a", N: 1, Offset: 1}, {ID: 2, Key: "a", N: 1, Offset: 2}}
	for _, c := range []struct {
		delivery string
		want     string
	}{{AtLeastOnce, ""}, {ExactlyOnce, "1 duplicates read read_committed, exactly-once allows none (first: outbox id 2 (key a) again at 0@2)"}} {
		res := &Result{Delivery: c.delivery}
		(&verifier{recs: recs}).check(w, res)
		err := res.Err()
		if res.Duplicates != 1 || (c.want == "") != (err == nil) || (err != nil && err.Error() != c.want) {
			t.Errorf("%s: %d duplicates, Err() = %v, want %q", c.delivery, res.Duplicates, err, c.want)
		}
	}
	res := &Result{Delivery: ExactlyOnce, AbortedSeen: 1, NonTransactional: 2}
	if err := res.Err(); err == nil || !strings.Contains(err.Error(), "1 records of aborted transactions") || !strings.Contains(err.Error(), "2 records were written outside a transaction") {
		t.Errorf("Err() = %v", err)
	}
}
