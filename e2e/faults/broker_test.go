package faults

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// outage is how long the broker stays away: CDC_RELAY_FAULTS_OUTAGE (a Go duration), default
// 20s for CI; the full study of the seed is 60s.
func outage(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("CDC_RELAY_FAULTS_OUTAGE")
	if v == "" {
		return 20 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 10*time.Second {
		t.Fatalf("CDC_RELAY_FAULTS_OUTAGE=%q: want a duration of at least 10s", v)
	}
	return d
}

// The broker paused (SIGSTOP: it neither answers nor refuses) while rows keep coming: the relay
// holds its confirmed position, stays up (no crash loop, no replication reconnect), logs the
// outage once and one probe per backoff cycle, and after the resume publishes everything,
// per key in commit order, nothing lost.
func TestBrokerPausedHoldsPositionAndResumesInOrder(t *testing.T) {
	brokerOutage(t, "pause", "resume")
}

// The same with the broker killed (SIGKILL) and started again, and a producer buffer far
// smaller than the backlog: Produce blocks, reading the slot stops, and the stream keeps
// answering the server (no wal_sender_timeout, no reconnect) until Kafka is back.
func TestBrokerKilledAndRestartedResumesInOrder(t *testing.T) {
	brokerOutage(t, "kill", "start", "--max-buffered-records", "300")
}

var probeLine = regexp.MustCompile(`msg="Kafka unavailable: probe failed"|msg="Kafka answers metadata`)

func brokerOutage(t *testing.T, down, up string, relayArgs ...string) {
	testenv.CheckControlled(t)
	d := outage(t)
	e := testenv.NewRelayEnv(t, true)
	p := e.Start(t, nil, relayArgs...)
	w, cons := writing(t, e, 20*time.Millisecond)
	restored := false
	defer func() {
		if !restored {
			testenv.KafkaCtl(t, up)
		}
	}()

	testenv.Eventually(t, 30*time.Second, "rows flowing before the outage", func() bool { return len(cons.Records()) > 50 })
	began := time.Now()
	testenv.KafkaCtl(t, down)
	t.Logf("broker %s at %s for %s", down, began.Format(time.TimeOnly), d)

	// The outage itself is the scenario: a fixed length, observed at its middle and its end.
	time.Sleep(d / 2)
	mid := e.F.SlotConfirmed(t)
	time.Sleep(d - d/2)
	end := e.F.SlotConfirmed(t)
	wal := e.F.CurrentWAL(t)
	if p.Exited() {
		t.Fatalf("the relay exited during the outage:\n%s", p.Output())
	}
	if mid != end {
		t.Errorf("the confirmed position moved during the outage: %s at its middle, %s at its end", mid, end)
	}
	if end >= wal {
		t.Errorf("the slot confirmed %s, the whole WAL (%s), although rows written during the outage were not in Kafka", end, wal)
	}
	out := p.Output()
	if n := strings.Count(out, "Kafka is not acknowledging"); n != 1 {
		t.Errorf("outage logged %d times, want once", n)
	}
	probes := len(probeLine.FindAllString(out, -1))
	// One probe per cycle, the cycle doubling from 1s: a handful, not one per record or per second.
	maxProbes := 2
	for c := time.Second; c < d; c *= 2 {
		maxProbes++
	}
	if probes < 2 || probes > maxProbes {
		t.Errorf("%d probes logged during a %s outage, want 2 to %d", probes, d, maxProbes)
	}

	testenv.KafkaCtl(t, up)
	restored = true
	resumed := time.Now()
	recs, dups := w.Finish(t, 50, "more rows after the outage", 2*time.Minute)
	caughtUp := time.Since(resumed)
	testenv.Eventually(t, 30*time.Second, "the outage's end to be logged", func() bool {
		return strings.Contains(p.Output(), "Kafka is acknowledging again")
	})
	out = p.Output()
	if strings.Contains(out, "replication connection lost") || strings.Count(out, "msg=streaming") != 1 {
		t.Errorf("the replication stream was interrupted by a Kafka outage")
	}
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "Kafka") {
			t.Log(line)
		}
	}
	t.Logf("%s outage: %d rows committed, %d records, %d duplicates, %d probes, confirmed held at %s, all delivered %s after %s",
		d, len(w.Committed()), len(recs), dups, probes, end, caughtUp.Round(time.Millisecond), up)
}
