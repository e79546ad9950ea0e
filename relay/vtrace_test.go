package relay

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/record"
)

// traceHash is the hash of what a schedule fixed, as the world outside the relay saw it, and
// nothing that the interleaving of goroutines decides: it returns the hash and the number of
// events hashed. Run after checkEnd (which read Kafka to its end).
//
// Inside a testing/synctest bubble the clock is the schedule's, but the Go runtime still picks
// at random among goroutines ready at one virtual instant (and among ready select cases), so
// two runs of a seed differ in what depends on that order: how many sessions a drop scripted at
// a message count ends, how many status updates are sent and when, which records a batch holds
// and so which ones a fault scripted for the next produce request hits, how many times a
// record is replayed, and so the offsets. The trace is what the contract fixes whatever the
// order:
//
//	'w' the WAL end and the slot's position after the final run (everything confirmed);
//	'r' per run, whether Run returned an error (a fatal fault; in exactly-once schedules not
//	    one that ends such a run by design: a lost session, a failed commit, a fence);
//	'k' per topic, partition and key, the records in the order of their first delivery (the
//	    duplicates of replays and the offsets left out);
//	'd' the set of dead letters, each by its outbox-table/outbox-id, the topic it was meant for
//	    and the first words of its reason, wherever it was parked (topic or table);
//	'v' the invariants that failed, so that a failing seed fails the same way again.
//
// Rows that an injected for-good fault may have refused are in neither 'k' nor 'd' (mayHit):
// which rows a fault scripted for a partition's next produce requests meets is the
// interleaving's (which records a batch holds), and a replay may carry them to their topic
// after their letter. The invariants check them as every other row.
//
// CDC_RELAY_VSIM_DUMP=dir writes each run's events to dir as text, to see where two runs part.
func (h *harness) traceHash() (string, int) {
	sum := sha256.New()
	if dir := os.Getenv("CDC_RELAY_VSIM_DUMP"); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("seed-%d-%d.txt", h.sc.seed, time.Now().UnixNano()^rand.Int64())))
		if err == nil {
			defer f.Close()
			sum = &dumpHash{Hash: sum, w: f}
		}
	}
	n := 0
	event := func(tag byte, fields ...any) {
		n++
		fmt.Fprintf(sum, "%c", tag)
		for _, f := range fields {
			fmt.Fprintf(sum, " %v", f)
		}
		sum.Write([]byte{'\n'})
	}
	event('w', h.srv.WALEnd(), h.srv.Confirmed())
	h.mu.Lock()
	for i, failed := range h.runFailed {
		event('r', i+1, failed)
	}
	violated := map[string]bool{}
	for _, v := range h.violations {
		violated[v[:strings.IndexByte(v, ')')+1]] = true
	}
	h.mu.Unlock()
	h.idx.mu.Lock()
	recs := slices.Clone(h.idx.recs) // each partition's in offset order
	h.idx.mu.Unlock()
	type letter struct{ id, from, cause string }
	var letters []letter
	type tpk struct {
		topic string
		part  int32
		key   string
	}
	for _, r := range recs {
		if r.topic == simDLQ {
			letters = append(letters, letter{r.id, r.dlqFrom, r.dlqErr})
		}
	}
	for _, r := range h.store.all() {
		letters = append(letters, letter{string(record.Header(r, record.HeaderOutboxTable)) + "/" + string(record.Header(r, record.HeaderOutboxID)),
			string(record.Header(r, record.HeaderDLQTopic)), string(record.Header(r, record.HeaderDLQError))})
	}
	hit := h.mayHit()
	order := map[tpk][]string{}
	first := map[string]bool{}
	for _, r := range recs {
		if k := r.topic + "\x00" + r.id; r.topic != simDLQ && !hit[r.id] && !first[k] {
			first[k] = true
			order[tpk{r.topic, r.part, r.key}] = append(order[tpk{r.topic, r.part, r.key}], r.id)
		}
	}
	keys := slices.SortedFunc(maps.Keys(order), func(a, b tpk) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.part, b.part), cmp.Compare(a.key, b.key))
	})
	for _, k := range keys {
		event('k', k.topic, k.part, k.key, strings.Join(order[k], " "))
	}
	for i := range letters {
		letters[i].cause, _, _ = strings.Cut(letters[i].cause, ":")
	}
	letters = slices.DeleteFunc(letters, func(l letter) bool { return hit[l.id] })
	slices.SortFunc(letters, func(a, b letter) int {
		return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.from, b.from), cmp.Compare(a.cause, b.cause))
	})
	for _, l := range slices.Compact(letters) {
		event('d', l.id, l.from, l.cause)
	}
	for _, v := range slices.Sorted(maps.Keys(violated)) {
		event('v', v)
	}
	return hex.EncodeToString(sum.Sum(nil)[:8]), n
}

// mayHit is the refs of the rows that an injected for-good fault may refuse: those of its topic
// and partition that were committed by the end of its run (a run replays what the slot has not
// confirmed). A row's partition is the producer's (the sticky key partitioner: by key).
func (h *harness) mayHit() map[string]bool {
	hit := map[string]bool{}
	parts := map[string]int32{}
	for _, tp := range h.sc.topics {
		parts[tp.name] = tp.partitions
	}
	partitioner := kgo.StickyKeyPartitioner(nil)
	committed := 0
	for _, run := range h.sc.runs {
		committed += run.commit
		for _, f := range run.faults {
			if f.kind != faultForGood {
				continue
			}
			tp := partitioner.ForTopic(f.topic)
			for _, tx := range h.sc.txns[:committed] {
				for _, r := range tx.rows {
					if r.topic == f.topic && int32(tp.Partition(&kgo.Record{Key: []byte(r.key)}, int(parts[f.topic]))) == f.partition {
						hit[r.ref()] = true
					}
				}
			}
		}
	}
	return hit
}

// dumpHash writes every event it hashes.
type dumpHash struct {
	hash.Hash
	w io.Writer
}

func (d *dumpHash) Write(p []byte) (int, error) {
	if _, err := d.w.Write(p); err != nil {
		return 0, err
	}
	return d.Hash.Write(p)
}

// TestSimVirtualDeterministic runs each of -vsim.n seeds (default vsimDeterministicN) twice and
// requires the same schedule (a pure function of the seed) and the same trace (traceHash: what
// the schedule fixes) both times: a seed that fails replays as it failed. A differing seed
// prints the command that writes both runs' events, to see where they part.
func TestSimVirtualDeterministic(t *testing.T) {
	vsimSetup(t)
	n := *vsim.n
	if n == 0 {
		n = vsimDeterministicN()
	}
	seeds := vsim.seeds(n)
	var same atomic.Int64
	ran, el := eachSeed(t, seeds, vsimWorkerCount(), func(seed uint64) bool {
		if a, b := newVSim(seed), newVSim(seed); a.sc.String()+a.String() != b.sc.String()+b.String() {
			t.Errorf("seed %d: two schedules differ:\n%s%s\n%s%s", seed, a.sc, a, b.sc, b)
			return false
		}
		r1, r2 := runVSchedule(t, seed), runVSchedule(t, seed)
		if r1.hash != r2.hash {
			t.Errorf("seed %d: traces %s (%d events) and %s (%d events) differ; see where they part: mkdir -p /tmp/d && CDC_RELAY_VSIM_DUMP=/tmp/d go test -count=2 -run 'SimVirtual$' ./relay -vsim.seed %d && diff /tmp/d/seed-%d-*",
				seed, r1.hash, r1.events, r2.hash, r2.events, seed, seed)
			return false
		}
		same.Add(1)
		return true
	})
	t.Logf("%d of %d seeds gave the same trace twice (%s)", same.Load(), ran, el.Round(time.Millisecond))
}

// vsimDeterministicN is how many seeds TestSimVirtualDeterministic runs twice by default.
func vsimDeterministicN() int {
	switch {
	case testing.Short():
		return 20
	case raceEnabled:
		return 20 // -race costs ~10× per schedule
	}
	return 200
}
