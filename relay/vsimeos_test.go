package relay

// Exactly-once schedules of the virtual-time simulation (`run --delivery exactly-once`;
// DESIGN.md, "Exactly-once"). One vschedule in four runs every relay of the schedule in
// exactly-once mode (-vsim.eos all|none forces it): the harness's Kafka index reads
// read_committed, as the consumers the mode is for do, so that every invariant of
// siminvariants_test.go is about what they see, and these hold besides:
//
//	(x1) no record is visible twice to a read_committed reader (on its topic or the dead-letter
//	     topic), across crashes, restarts, lost sessions and fences;
//	(x2) the read_committed reader sees exactly the records of committed Kafka transactions:
//	     a read_uncommitted reader that keeps the markers (which sees the aborted ones too)
//	     says which transaction each record was in;
//	(x3) every position the slot is given is covered by committed checkpoints: each transaction
//	     with outbox rows before it lies before a committed checkpoint's Position, or a
//	     checkpoint's split counts every record of it (E5: the idle rule may confirm beyond
//	     Position only such WAL), checked at each status update, as invariant (a) is;
//	(x4) a relay fenced by the next holder of the slot's transactional id (the takeovers of
//	     these schedules take the id as well as the slot) has nothing visible after the fence.
//
// A run in exactly-once mode ends with an error on a lost session, a failed commit or a fence
// (exactly.go): those are expected, and the schedule's next run is the restart. Some runs crash
// between a Kafka commit and its confirm (rule 14's hook, in process: the pipeline's goroutine
// exits there and the run is stopped, so the slot keeps the position before it), and the
// replay must skip exactly what the checkpoint covers.

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
)

var vsimEOS = flag.String("vsim.eos", "", "exactly-once schedules of the virtual-time simulation: all, none, or \"\" (one in four)")

// drawEOS draws the schedule's exactly-once settings, from vschedule's own stream after every
// other draw, so that the at-least-once part of a seed stays what it was.
func (vs *vschedule) drawEOS(rng *rand.Rand) {
	vs.eos = rng.IntN(4) == 0
	switch *vsimEOS {
	case "all":
		vs.eos = true
	case "none":
		vs.eos = false
	}
	vs.eosInterval = []time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond}[rng.IntN(3)]
	vs.eosMaxRecords = []int{3, 50, 10_000}[rng.IntN(3)]
	if vs.long {
		vs.eosInterval = []time.Duration{100 * time.Millisecond, time.Second}[rng.IntN(2)]
	}
	vs.crashAfter = make([]int, len(vs.sc.runs))
	for i := range vs.crashAfter {
		if rng.IntN(3) == 0 {
			vs.crashAfter[i] = 1 + rng.IntN(4)
		}
	}
	if !vs.eos {
		vs.crashAfter = nil
	}
	// One schedule in eight holds a Kafka transaction open for minutes unless the relay is caught
	// up between PostgreSQL transactions (E10a) or it reaches its size: then only the commits at
	// those moments let the final run's slot reach the WAL end within its wait (invariant (b)).
	// Drawn last, so that every other draw of a seed stays what it was.
	if rng.IntN(8) == 0 {
		vs.eosInterval, vs.eosTimeout = 5*time.Minute, 12*time.Minute // kfake's transaction.max.timeout.ms: 15 min
	}
}

// eosHarness is what the harness keeps of an exactly-once schedule.
type eosHarness struct {
	crashAfter []int // per run: crash before the confirm of the Nth commit (0: never)
	crashes    []int // per run: the commits whose confirm the run reached (guarded by the harness's mu)
	fences     []fence
}

// fence is one takeover of the slot's transactional id (x4): the producer id and epoch the
// next holder got, and the end offsets once it had them.
type fence struct {
	run   int
	pid   int64
	epoch int16
	ends  map[string]map[int32]int64
}

// indexMode is what a kafkaIndex reads.
type indexMode uint8

const (
	indexPlain     indexMode = iota // read_uncommitted, to the end offsets (at-least-once)
	indexCommitted                  // read_committed with the markers, to the last stable offsets, and the checkpoints
	indexRaw                        // read_uncommitted with the markers: which transaction each record was in (x2)
)

func (m indexMode) opts() []kgo.Opt {
	switch m {
	case indexCommitted:
		// The markers are kept so that a read ends at the last stable offset when a marker is
		// the last thing before it, as it is after every transaction.
		return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}
	case indexRaw:
		return []kgo.Opt{kgo.KeepControlRecords()}
	}
	return nil
}

// ends is where a refresh reads to: the last stable offsets for a read_committed reader.
func (k *kafkaIndex) ends(ctx context.Context) (kadm.ListedOffsets, error) {
	if k.mode == indexCommitted {
		return k.adm.ListCommittedOffsets(ctx, k.topics...)
	}
	return k.adm.ListEndOffsets(ctx, k.topics...)
}

// eosIndex is what an index in the committed or raw mode reads beyond the records.
type eosIndex struct {
	// committed mode: the highest Position of the slot's committed checkpoints, and the most
	// records each split transaction's had (x3), and the checkpoint records (x4).
	position pglogrepl.LSN
	splits   map[pglogrepl.LSN]int64
	cps      []seenRec
	// raw mode: each transactional record's outcome by its place, and the records of each
	// producer's transaction whose marker has not been read yet.
	outcome map[tpo]txnOutcome
	pending map[pidPart][]tpo
}

type tpo struct {
	topic string
	part  int32
	off   int64
}

type pidPart struct {
	topic string
	part  int32
	pid   int64
}

type txnOutcome uint8

const (
	txnOpen txnOutcome = iota
	txnCommitted
	txnAborted
)

// eosRecord takes what is not an outbox record (a marker, a checkpoint) and reports whether
// it was one; in raw mode it notes a transactional record's producer for its marker.
func (k *kafkaIndex) eosRecord(r *kgo.Record) bool {
	e := &k.eos
	if k.mode == indexRaw && e.outcome == nil {
		e.outcome, e.pending = map[tpo]txnOutcome{}, map[pidPart][]tpo{}
	}
	at := tpo{r.Topic, r.Partition, r.Offset}
	pp := pidPart{r.Topic, r.Partition, r.ProducerID}
	switch {
	case r.Attrs.IsControl():
		if k.mode == indexRaw && len(r.Key) >= 4 {
			out := txnAborted
			if binary.BigEndian.Uint16(r.Key[2:4]) == 1 {
				out = txnCommitted
			}
			for _, p := range e.pending[pp] {
				e.outcome[p] = out
			}
			delete(e.pending, pp)
		}
		return true
	case r.Topic == kafkatxn.DefaultCheckpointTopic:
		e.cps = append(e.cps, seenRec{topic: r.Topic, part: r.Partition, off: r.Offset, pid: r.ProducerID, epoch: r.ProducerEpoch})
		var cp kafkatxn.Checkpoint
		if string(r.Key) == "sim_slot" && cp.UnmarshalBinary(r.Value) == nil {
			e.position = max(e.position, cp.Position)
			if cp.Split.Records > 0 {
				if e.splits == nil {
					e.splits = map[pglogrepl.LSN]int64{}
				}
				e.splits[cp.Split.LSN] = max(e.splits[cp.Split.LSN], cp.Split.Records)
			}
		}
		return true
	case k.mode == indexRaw && r.Attrs.IsTransactional():
		e.outcome[at] = txnOpen
		e.pending[pp] = append(e.pending[pp], at)
	}
	return false
}

// indexMode is the harness's index's: read_committed in exactly-once schedules.
func (h *harness) indexMode() indexMode {
	if h.eos != nil {
		return indexCommitted
	}
	return indexPlain
}

// eosSetup creates the checkpoint topic as the relay does (compacted) and adds it to what the
// index reads.
func (h *harness) eosSetup(ctx context.Context, topics []string) ([]string, error) {
	if h.eos == nil {
		return topics, nil
	}
	cl := mustClient(append(h.netOpts(), kgo.SeedBrokers(h.kafka.ListenAddrs()...))...)
	defer cl.Close()
	if err := kafkatxn.EnsureCheckpointTopic(ctx, cl, kafkatxn.DefaultCheckpointTopic, 1); err != nil {
		return nil, err
	}
	h.eos.crashes = make([]int, len(h.sc.runs))
	return append(topics, kafkatxn.DefaultCheckpointTopic), nil
}

// eosRelay installs the crash hook on a relay of the schedule's runs: before the confirm of
// the run's crashAfter-th commit the pipeline's goroutine exits, as if the process were killed
// between the Kafka commit and the confirm, and the run is stopped (its final status carries
// the position before). Not on Run's own goroutine (a clean stop's commit, once the pipeline
// stopped): a killed process never returns from Run, and the harness waits for it.
func (h *harness) eosRelay(r *Relay) {
	if h.eos == nil {
		return
	}
	r.cfg.BeforeConfirm = func(pglogrepl.LSN) {
		rs := h.runCtx.Load()
		if rs == nil || rs.run == nil {
			return
		}
		i := h.runIndex(rs.run)
		if i < 0 || h.eos.crashAfter[i] == 0 {
			return
		}
		select {
		case <-r.stopped:
			return
		default:
		}
		h.mu.Lock()
		h.eos.crashes[i]++
		crash := h.eos.crashes[i] == h.eos.crashAfter[i]
		h.mu.Unlock()
		if crash {
			rs.cancel()
			runtime.Goexit()
		}
	}
}

func (h *harness) runIndex(run *simRun) int {
	for i := range h.sc.runs {
		if &h.sc.runs[i] == run {
			return i
		}
	}
	return -1
}

// eosRunError reports whether err is one that ends an exactly-once run by design: a lost
// session, a commit that failed or whose outcome is unknown, a fence, or a record that a
// transaction Kafka aborted (its timeout, a fence) could not take.
func eosRunError(err error) bool {
	if kafkatxn.IsFenced(err) || errors.Is(err, kafkatxn.ErrNotCommitted) || errors.Is(err, kafkatxn.ErrOutcomeUnknown) ||
		errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.TransactionAbortable) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "exactly-once: the replication session ended") ||
		strings.Contains(s, "exactly-once: commit the Kafka transaction")
}

// eosRefusedRetryError reports whether err is Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER for a
// record: in exactly-once mode, a produce the broker appended and answered REQUEST_TIMED_OUT,
// whose retry was then refused for good, leaves the partition's sequence past the failed
// batch; franz-go, whose transactional producer keeps its epoch, gives the failed batch's
// sequence numbers to the partition's next batch, and Kafka refuses it as out of order (or,
// when it matches the appended batch, takes it for a duplicate: exactlyOnce.held). The record fails,
// the run ends and the transaction aborts: the restart replays (DESIGN.md E8). Only a run with
// a refusal for good can end so (seeds 36517, 55216, 110511, 153862).
func eosRefusedRetryError(err error) bool {
	return errors.Is(err, kerr.OutOfOrderSequenceNumber)
}

// eosTakeover is takeover in an exactly-once schedule: another relay takes the slot and then
// its transactional id (E3's order), which fences this one; the session is dropped only later,
// so that the fenced relay may try to commit first (a zombie paused past its session), and the
// end offsets at the fence are kept for x4. It returns the timer that gives the slot back,
// takeoverFor after it took it (nil if it took nothing), as takeover does.
func (h *harness) eosTakeover(i int, r *Relay, run *simRun, runDone <-chan struct{}) (release *time.Timer) {
	if !awaitStreaming(r, runDone) {
		return nil
	}
	h.srv.HoldSlot(4343)
	release = time.AfterFunc(run.takeoverFor, func() { h.srv.HoldSlot(0) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := mustClient(append(h.netOpts(), kgo.SeedBrokers(h.kafka.ListenAddrs()...),
		kgo.TransactionalID(kafkatxn.TransactionalID("sim_slot")), kgo.TransactionTimeout(kafkatxn.DefaultTransactionTimeout))...)
	defer cl.Close()
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		h.violate("x4", "run %d: the next holder could not take the transactional id: %v", i+1, err)
		h.srv.DropAll()
		return release
	}
	topics := append([]string{simDLQ, kafkatxn.DefaultCheckpointTopic}, h.topicNames()...)
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err == nil {
		f := fence{run: i, pid: pid, epoch: epoch, ends: offsetsByPartition(ends)}
		h.mu.Lock()
		h.eos.fences = append(h.eos.fences, f)
		h.mu.Unlock()
	}
	select {
	case <-runDone:
	case <-time.After(run.takeoverFor / 2):
	}
	h.srv.DropAll()
	return release
}

// checkCovered is x3 for one status update: every transaction with outbox rows that starts
// its commit before the flush position is covered by a committed checkpoint, its Position past
// it or its split counting all its records. (Not only the newest: a slot confirmed past a
// split transaction, all of whose parts committed, is never replayed again, and the next
// checkpoint's split is another transaction's.) It reads the index as it is, and again from
// Kafka before it reports.
func (h *harness) checkCovered(session int, flush pglogrepl.LSN) {
	h.mu.Lock()
	committed := h.committed
	h.mu.Unlock()
	uncovered := func() (pglogrepl.LSN, string) {
		h.idx.mu.Lock()
		defer h.idx.mu.Unlock()
		pos := h.idx.eos.position
		for i, c := range committed {
			if c.txn.CommitLSN >= flush {
				break
			}
			if len(c.rows) > 0 && c.txn.CommitLSN >= pos && h.idx.eos.splits[c.txn.CommitLSN] < int64(len(c.rows)) {
				return pos, fmt.Sprintf("transaction %d (xid %d, commit %s, %d rows, split checkpoints count %d)", i, c.txn.Xid, c.txn.CommitLSN, len(c.rows), h.idx.eos.splits[c.txn.CommitLSN])
			}
		}
		return pos, ""
	}
	if _, why := uncovered(); why == "" {
		return
	}
	if err := h.idx.refresh(); err != nil {
		h.violate("x3", "cannot read Kafka to check flush %s: %v", flush, err)
		return
	}
	if pos, why := uncovered(); why != "" {
		h.violate("x3", "session %d confirmed %s past %s, which no committed checkpoint covers (highest position %s)", session, flush, why, pos)
	}
}

// checkEOS is x1, x2 and x4, after the final run (checkEnd read the index to its end).
func (h *harness) checkEOS() {
	if h.eos == nil {
		return
	}
	topics := append([]string{simDLQ}, h.topicNames()...)
	raw, err := newKafkaIndex(indexRaw, h.kafka.ListenAddrs(), topics, h.indexOpts()...)
	if err == nil {
		defer raw.close()
		err = raw.refresh()
	}
	if err != nil {
		h.violate("x2", "cannot read Kafka read_uncommitted: %v", err)
		return
	}
	h.mu.Lock()
	fences := h.eos.fences
	h.mu.Unlock()
	h.idx.mu.Lock()
	defer h.idx.mu.Unlock()
	// x1: once per record, wherever it went.
	for id, at := range h.idx.byID {
		if len(at) < 2 {
			continue
		}
		var where []string
		for _, j := range at {
			rec := h.idx.recs[j]
			where = append(where, fmt.Sprintf("%s[%d]@%d", rec.topic, rec.part, rec.off))
		}
		h.violate("x1", "outbox id %s is visible %d times to a read_committed reader: %s", id, len(at), strings.Join(where, ", "))
	}
	// x2: what the read_committed reader sees is what committed transactions hold.
	seen := map[tpo]bool{}
	for _, rec := range h.idx.recs {
		at := tpo{rec.topic, rec.part, rec.off}
		seen[at] = true
		if out, ok := raw.eos.outcome[at]; !ok || out != txnCommitted {
			h.violate("x2", "%s[%d]@%d (%s) is visible to a read_committed reader, but its transaction was %s", rec.topic, rec.part, rec.off, rec.id,
				map[bool]string{true: [...]string{"never ended", "committed", "aborted"}[out], false: "not transactional"}[ok])
		}
	}
	for _, rec := range raw.recs {
		if at := (tpo{rec.topic, rec.part, rec.off}); raw.eos.outcome[at] == txnCommitted && !seen[at] {
			h.violate("x2", "%s[%d]@%d (%s) is in a committed transaction, but a read_committed reader does not see it", rec.topic, rec.part, rec.off, rec.id)
		}
	}
	// x4: nothing of a fenced epoch is visible beyond the end offsets at the fence.
	for _, f := range fences {
		for _, recs := range [][]seenRec{h.idx.recs, h.idx.eos.cps} {
			for _, rec := range recs {
				if rec.pid == f.pid && rec.epoch < f.epoch && rec.off >= f.ends[rec.topic][rec.part] {
					h.violate("x4", "run %d: %s[%d]@%d (%s) of producer %d epoch %d became visible after the next holder fenced the epochs below %d (end offset then %d)",
						f.run+1, rec.topic, rec.part, rec.off, rec.id, rec.pid, rec.epoch, f.epoch, f.ends[rec.topic][rec.part])
					break
				}
			}
		}
	}
}

// eosString is the schedule's line on exactly-once.
func (vs *vschedule) eosString() string {
	if !vs.eos {
		return "  delivery: at-least-once\n"
	}
	return fmt.Sprintf("  delivery: exactly-once (eos), transaction interval %s, max records %d, transaction timeout %s, crash before the confirm of commit %v (per run)\n",
		vs.eosInterval, vs.eosMaxRecords, vs.eosTimeout, vs.crashAfter)
}
