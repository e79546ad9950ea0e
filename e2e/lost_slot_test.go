package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// A relay paused past wal_sender_timeout loses the slot to a standby, which replays from the
// slot and publishes on. When the paused relay wakes, the records its producer still buffered
// (Kafka was out of its reach, so none were acknowledged) must not land after the new holder's
// records of the same keys: a consumer would see an older event after a newer one of its
// aggregate. The relay aborts them as soon as it sees the session lost (DESIGN.md, "A lost
// session aborts what the producer buffers"); the standby's replay publishes those rows instead.
//
// Relay A reaches Kafka through a proxy that the test stalls (every connection, those made later
// too, forwards nothing: A's records stay buffered, retrying), relay B reaches it directly and
// waits as a standby. A's walsender has a 5 s wal_sender_timeout (a user setting of its
// connection). SIGSTOP A past it; B takes the slot and publishes the stalled rows and later rows
// of the same keys; SIGCONT A, then end the stall. Each relay names itself in ce_source
// (--format cloudevents), so the topic tells whose record is whose.
func TestPausedRelayThatLostTheSlotLandsNothingAfterTheNewHolder(t *testing.T) {
	kafka := testenv.NewKafkaProxy(t)
	e := testenv.NewRelayEnv(t, true)
	a := e.Start(t, nil, "--pg-url", walSenderURL(t, "", "5s"), "--brokers", kafka.Brokers(),
		"--format", "cloudevents", "--ce-source", "/relay-a", "--metrics-addr", "127.0.0.1:0")
	aMetrics := metricsAddr(t, a)
	testenv.Eventually(t, 60*time.Second, "relay A to stream", func() bool { return strings.Contains(a.Output(), "msg=streaming") })
	b := e.Start(t, nil, "--format", "cloudevents", "--ce-source", "/relay-b", "--metrics-addr", "")
	testenv.Eventually(t, 60*time.Second, "relay B to wait as a standby", func() bool { return strings.Contains(b.Output(), "waiting as a standby") })

	cons := testenv.Consume(t, e.F.Topic)
	w := testenv.NewWriter(e.F.Pool, e.F.Table, e.F.Topic)
	const keys = 4
	write := func(txns int) []int64 {
		before := len(w.Committed())
		for range txns {
			if err := w.Tx(t.Context(), 2, keys); err != nil {
				t.Fatal(err)
			}
		}
		return w.Committed()[before:]
	}
	cons.WaitFor(t, 60*time.Second, "the rows A published before the stall", testenv.HasAll(write(5)))

	if n := kafka.Stall(); n == 0 {
		t.Fatal("relay A has no Kafka connection to stall")
	}
	stalled := write(10)
	metricAtLeast(t, aMetrics, "cdc_relay_records_in_flight", float64(len(stalled)))

	a.Pause(t)
	testenv.Eventually(t, 60*time.Second, "relay B to take the slot", func() bool { return strings.Contains(b.Output(), "msg=streaming") })
	write(10)
	cons.WaitFor(t, 60*time.Second, "every committed row, published by B", testenv.HasAll(w.Committed()))

	a.Continue()
	// With the abort, A's buffer empties while Kafka is still out of its reach (nothing it held
	// can land any more); without it, it would hold its records until the stall ends.
	emptied := waitFor(90*time.Second, func() bool { return scrape(t, aMetrics)["cdc_relay_records_in_flight"] == 0 })
	kafka.Resume()
	if !emptied {
		t.Errorf("relay A still buffers records for Kafka 90 s after it woke without the slot")
		testenv.Eventually(t, 120*time.Second, "relay A's records to land or fail", func() bool {
			return scrape(t, aMetrics)["cdc_relay_records_in_flight"] == 0
		})
	}
	recs := caughtUp(t, cons, e.F.Topic)

	byA, late := landedAfterNewHolder(recs, "/relay-a", "/relay-b")
	for i, r := range late {
		if i < 10 {
			t.Errorf("outbox id %s (key %s) from relay A at %d/%d, after relay B's first record of the key",
				testenv.Header(r, "outbox-id"), r.Key, r.Partition, r.Offset)
		}
	}
	if len(late) > 0 {
		t.Errorf("%d records of relay A landed after relay B's first record of their key", len(late))
	}
	if byA == 0 || byA == len(recs) {
		t.Errorf("relay A published %d of %d records: the test did not run both relays", byA, len(recs))
	}
	if strings.Count(a.Output(), "msg=streaming") > 1 {
		t.Errorf("relay A streamed again while B held the slot:\n%s", a.Output())
	}

	// The abort left A's producer usable: once B stops, A takes the slot back and publishes.
	if code := b.Stop(t); code != 0 {
		t.Errorf("relay B: exit %d after SIGTERM", code)
	}
	testenv.Eventually(t, 60*time.Second, "relay A to take the slot back", func() bool { return strings.Count(a.Output(), "msg=streaming") > 1 })
	retaken := write(5)
	recs = cons.WaitFor(t, 60*time.Second, "the rows A published after it took the slot back", testenv.HasAll(retaken))
	dups := w.Verify(t, recs)
	t.Logf("%d committed rows, %d of them while A was cut off from Kafka; %d records, %d by A before B stopped, %d duplicates",
		len(w.Committed()), len(stalled), len(recs), byA, dups)
}

// waitFor polls cond every 100 ms until it holds (true) or timeout passed (false).
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}
