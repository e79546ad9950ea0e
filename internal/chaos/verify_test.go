package chaos

import (
	"strings"
	"testing"
	"time"
)

// The verdict catches a lost row, a delivered rolled-back row and a per-key reordering of
// first deliveries, accepts duplicates, and blames each duplicate on the last fault before it.
func TestCheck(t *testing.T) {
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	newW := func() *writer {
		w := &writer{perKey: map[string][]int64{}, rolled: map[int64]bool{}}
		w.record([]int64{1, 2, 3}, []string{"a", "b", "a"}, true)
		w.record([]int64{4}, []string{"a"}, false)
		w.record([]int64{5, 6}, []string{"b", "a"}, true)
		return w
	}
	events := func() []Event {
		return []Event{{Kind: "kill", N: 1, At: at(10)}, {Kind: "pg-restart", At: at(20)}, {Kind: "kill", N: 2, At: at(30)}}
	}
	d := func(id int64, key string, p int32, off int64, s int) delivery {
		return delivery{id: id, key: key, partition: p, offset: off, at: at(s)}
	}
	// Partition 0 holds key a, partition 1 key b. Replays after kill 1 (ids 1, 3) and kill 2 (6).
	good := []delivery{
		d(1, "a", 0, 0, 1), d(3, "a", 0, 1, 2), d(1, "a", 0, 2, 11), d(3, "a", 0, 3, 12), d(6, "a", 0, 4, 25), d(6, "a", 0, 5, 31),
		d(2, "b", 1, 0, 1), d(5, "b", 1, 1, 22),
	}
	cases := []struct {
		name                  string
		recs                  []delivery
		lost, rolled, reorder int
	}{
		{"good", good, 0, 0, 0},
		{"lost", append(append([]delivery{}, good[:4]...), good[6:]...), 1, 0, 1}, // id 6 never arrives
		{"rolled back delivered", append(append([]delivery{}, good...), d(4, "a", 0, 6, 40)), 0, 1, 1},
		{"reordered", []delivery{d(3, "a", 0, 0, 1), d(1, "a", 0, 1, 2), d(6, "a", 0, 2, 3), d(2, "b", 1, 0, 1), d(5, "b", 1, 1, 2)}, 0, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := &verifier{recs: c.recs}
			res := &Result{Events: events()}
			v.check(newW(), res)
			if res.Lost != c.lost || res.RolledBackSeen != c.rolled || res.OrderViolations != c.reorder {
				t.Errorf("lost %d rolled-back %d reordered keys %d, want %d %d %d (%s)",
					res.Lost, res.RolledBackSeen, res.OrderViolations, c.lost, c.rolled, c.reorder, res.FirstOrderProblem)
			}
			if (c.lost+c.rolled+c.reorder == 0) != (res.Err() == nil) {
				t.Errorf("Err() = %v", res.Err())
			}
		})
	}
	v := &verifier{recs: good}
	res := &Result{Events: events()}
	v.check(newW(), res)
	if res.Duplicates != 3 || res.Events[0].Dups != 2 || res.Events[1].Dups != 0 || res.Events[2].Dups != 1 {
		t.Errorf("duplicates %d, per event %+v", res.Duplicates, res.Events)
	}
	if res.MaxDupsOneCrash != 2 || res.MaxDupsCrash != 1 {
		t.Errorf("largest from one crash %d (kill #%d), want 2 (kill #1)", res.MaxDupsOneCrash, res.MaxDupsCrash)
	}
	if res.Committed != 5 || res.RolledBack != 1 || res.CommittedTxs != 2 || res.RolledBackTxs != 1 {
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
