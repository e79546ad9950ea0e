package faults

// Starting into an outage, and the last-resort dead letter: a standby across a PostgreSQL
// outage, a relay started while Kafka is down, and a dead letter whose headers hold a NUL byte
// (tests that need a service stopped or paused, or a broker with an authorizer).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// insertRows commits n one-row transactions on key and returns their ids, retrying each while
// PostgreSQL is away (e.g. just restarted).
func insertRows(t *testing.T, f *testenv.Fixture, key string, n int) []int64 {
	t.Helper()
	var ids []int64
	for i := 0; i < n; i++ {
		var id int64
		testenv.Eventually(t, 30*time.Second, "an outbox insert to succeed", func() bool {
			return f.Pool.QueryRow(context.Background(), `INSERT INTO `+f.Table+` (aggregate_id, topic, payload) VALUES ($1, $2, $3::jsonb) RETURNING id`,
				key, f.Topic, fmt.Sprintf(`{"i": %d}`, i)).Scan(&id) == nil
		})
		ids = append(ids, id)
	}
	return ids
}

// A standby that has never streamed survives a PostgreSQL outage. Relay A streams,
// relay B waits as a standby; PostgreSQL is stopped for 6 s (three standby retries) and started
// again. B must still run; whichever relay holds the slot then is killed -9, and the other takes
// over and delivers the rows written afterwards.
func TestStandbyThatNeverStreamedSurvivesAPostgresOutage(t *testing.T) {
	testenv.CheckControlled(t)
	e := testenv.NewRelayEnv(t, true)
	a := e.Start(t, nil, "--metrics-addr", "")
	testenv.Eventually(t, 30*time.Second, "relay A to stream", func() bool { return strings.Contains(a.Output(), "msg=streaming") })
	b := e.Start(t, nil, "--metrics-addr", "")
	testenv.Eventually(t, 30*time.Second, "relay B to wait as a standby", func() bool {
		return strings.Contains(b.Output(), "waiting as a standby") || b.Exited()
	})
	if b.Exited() || strings.Contains(b.Output(), "msg=streaming") {
		t.Fatalf("relay B streams or exited while A holds the slot:\n%s", b.Output())
	}
	cons := testenv.Consume(t, e.F.Topic)
	before := insertRows(t, e.F, "k", 20)
	cons.WaitFor(t, 30*time.Second, "the rows before the outage", testenv.HasAll(before))

	restored := false
	testenv.PGCtl(t, "stop")
	defer func() {
		if !restored {
			testenv.PGCtl(t, "start")
		}
	}()
	// The outage itself is the scenario: B retries every 2 s, so it meets the refused
	// connection at least twice. It must not exit meanwhile.
	outageEnd := time.Now().Add(6 * time.Second)
	for time.Now().Before(outageEnd) && !b.Exited() {
		time.Sleep(100 * time.Millisecond)
	}
	if b.Exited() {
		t.Fatalf("the standby exited during a PostgreSQL outage (it had never streamed):\n%s", b.Output())
	}
	testenv.PGCtl(t, "start")
	restored = true

	// After the outage one of them holds the slot again, and the other waits.
	streams := func(p *testenv.Proc, wasStreaming int) bool {
		return strings.Count(p.Output(), "msg=streaming") > wasStreaming
	}
	var active, standby *testenv.Proc
	testenv.Eventually(t, 60*time.Second, "a relay to stream again after the outage", func() bool {
		switch {
		case a.Exited() || b.Exited():
			return true
		case streams(a, 1):
			active, standby = a, b
		case streams(b, 0):
			active, standby = b, a
		}
		return active != nil
	})
	for name, p := range map[string]*testenv.Proc{"A": a, "B": b} {
		if p.Exited() {
			t.Fatalf("relay %s exited after the PostgreSQL outage:\n%s", name, p.Output())
		}
	}
	// The other one says it waits (B kept on retrying through the outage; A, if B got the
	// slot first, found it held).
	waited := strings.Count(standby.Output(), "waiting as a standby")
	testenv.Eventually(t, 30*time.Second, "the other relay to wait as a standby again", func() bool {
		return strings.Count(standby.Output(), "waiting as a standby") > waited || standby.Exited()
	})
	if standby.Exited() {
		t.Fatalf("the standby exited after the outage:\n%s", standby.Output())
	}
	during := insertRows(t, e.F, "k", 20)
	cons.WaitFor(t, 60*time.Second, "the rows after the outage", testenv.HasAll(during))

	// Kill -9 the one streaming: the standby takes over and delivers what comes next.
	if err := syscall.Kill(active.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	was := strings.Count(standby.Output(), "msg=streaming")
	testenv.Eventually(t, 30*time.Second, "the standby to take over", func() bool { return streams(standby, was) || standby.Exited() })
	if standby.Exited() {
		t.Fatalf("the standby exited instead of taking over:\n%s", standby.Output())
	}
	after := insertRows(t, e.F, "k", 20)
	cons.WaitFor(t, 60*time.Second, "the rows after the takeover", testenv.HasAll(append(append(before, during...), after...)))
	who := "B"
	if standby == a {
		who = "A (B had taken the slot after the outage)"
	}
	t.Logf("%s took over after kill -9; %d records for %d rows", who, len(cons.Records()), len(before)+len(during)+len(after))
}

// kafkaWaitLine reports whether a log line is the relay's own warning that Kafka cannot be
// reached (not franz-go's, which carry component=kafka).
func kafkaWaitLine(line string) bool {
	l := strings.ToLower(line)
	return (strings.Contains(l, "level=warn") || strings.Contains(l, "level=error")) &&
		!strings.Contains(l, "component=kafka") && strings.Contains(l, "kafka") &&
		(strings.Contains(l, "unreachable") || strings.Contains(l, "waiting"))
}

func countLines(out string, match func(string) bool) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if match(line) {
			n++
		}
	}
	return n
}

// A relay (re)started while the broker is paused waits for it instead of exiting
// after --kafka-timeout: it still runs at three times that timeout, warning each cycle that Kafka
// is unreachable; once the broker is back, the rows written before and during the outage arrive,
// and SIGTERM exits 0. (A Kafka that can never work, e.g. a CA that does not verify the broker,
// still ends startup at once: TestSecureStartupFailures in e2e covers that.)
func TestRelayStartedWhileKafkaIsDownWaitsForIt(t *testing.T) {
	testenv.CheckControlled(t)
	e := testenv.NewRelayEnv(t, true)
	before := insertRows(t, e.F, "k", 10)

	testenv.KafkaCtl(t, "pause")
	restored := false
	defer func() {
		if !restored {
			testenv.KafkaCtl(t, "resume")
		}
	}()
	const timeout = 2 * time.Second
	started := time.Now()
	p := e.Start(t, nil, "--kafka-timeout", timeout.String(), "--metrics-addr", "")
	testenv.Eventually(t, 60*time.Second, "the relay to warn twice that Kafka is unreachable, past 3× --kafka-timeout", func() bool {
		return p.Exited() || countLines(p.Output(), kafkaWaitLine) >= 2 && time.Since(started) >= 3*timeout
	})
	if p.Exited() {
		t.Fatalf("the relay started while Kafka was down exited after %s instead of waiting:\n%s", time.Since(started).Round(time.Millisecond), p.Output())
	}
	during := insertRows(t, e.F, "k", 10)

	testenv.KafkaCtl(t, "resume")
	restored = true
	cons := testenv.Consume(t, e.F.Topic)
	recs := cons.WaitFor(t, 90*time.Second, "the rows written before and during the outage", testenv.HasAll(append(append([]int64{}, before...), during...)))
	// Per key in commit order.
	var last int64
	seen := map[string]bool{}
	for _, r := range recs {
		id := testenv.Header(r, "outbox-id")
		if seen[id] {
			continue
		}
		seen[id] = true
		n, _ := strconv.ParseInt(id, 10, 64)
		if n <= last {
			t.Errorf("id %d first delivered after id %d", n, last)
		}
		last = n
	}
	warnings := countLines(p.Output(), kafkaWaitLine)
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0:\n%s", code, p.Output())
	}
	for _, line := range strings.Split(p.Output(), "\n") {
		if kafkaWaitLine(line) {
			t.Log(line)
		}
	}
	t.Logf("%d warnings while Kafka was paused; %d records", warnings, len(recs))
}

// denyWrite adds a DENY WRITE ACL for the relay's principal on topic, removed by allow or at
// cleanup. It fails the test when the broker has no authorizer.
func denyWrite(t *testing.T, adm *kadm.Client, topic string) (allow func()) {
	t.Helper()
	ctx := context.Background()
	if _, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Operations(kadm.OpAny)); errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("the broker at CDC_RELAY_BROKERS has no authorizer: start it with scripts/faults-up.sh (make faults does)")
	}
	acl := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).
			Deny("User:ANONYMOUS").DenyHosts("*").Operations(kadm.OpWrite)
	}
	res, err := adm.CreateACLs(ctx, acl())
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("create the DENY WRITE ACL on %s: %v", topic, err)
	}
	allow = func() {
		if _, err := adm.DeleteACLs(context.Background(), acl()); err != nil {
			t.Errorf("delete the DENY WRITE ACL on %s: %v", topic, err)
		}
	}
	t.Cleanup(func() { _, _ = adm.DeleteACLs(context.Background(), acl()) })
	return allow
}

// A dead letter that the dead-letter topic refuses too goes to the PostgreSQL table,
// also when its headers hold a NUL byte (which jsonb and text refuse). The outbox's headers
// column is json here (jsonb cannot hold "\u0000"); the row goes to a topic the relay may not
// write, and the dead-letter topic is denied as well. The letter ends up in
// public.cdc_relay_dead_letters, the rows after it arrive, and the slot moves past it: the
// insert does not wedge.
func TestDeadLetterWithANULInItsHeadersIsParkedInTheTable(t *testing.T) {
	f := testenv.NewFixture(t)
	ctx := context.Background()
	if _, err := f.Pool.Exec(ctx, `ALTER TABLE `+f.Table+` ALTER COLUMN headers TYPE json USING headers::json`); err != nil {
		t.Fatal(err)
	}
	e := &testenv.RelayEnv{F: f, Bin: testenv.Binary(t, true), Env: []string{"CDC_RELAY_SLOT=" + f.Slot, "CDC_RELAY_PUBLICATION=" + f.Publication}}
	if out, errOut, code := testenv.Run(t, 30*time.Second, e.Bin, e.Env, "slot", "create", "--table", f.Table); code != 0 {
		t.Fatalf("slot create: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() {
		_, _ = f.Pool.Exec(context.Background(), `DELETE FROM public.cdc_relay_dead_letters WHERE slot = $1`, f.Slot)
	})
	adm := kadm.NewClient(testenv.Kafka(t))
	denied := f.Name + ".denied"
	testenv.CreateTopic(t, denied, 1)
	denyWrite(t, adm, denied)
	denyWrite(t, adm, f.DLQ)

	p := e.Start(t, nil, "--shutdown-timeout", "5s")
	cons := testenv.Consume(t, f.Topic)
	ins := func(key, topic, headers string) int64 {
		t.Helper()
		var id int64
		if err := f.Pool.QueryRow(ctx, `INSERT INTO `+f.Table+` (aggregate_id, topic, payload, headers) VALUES (nullif($1, ''), $2, '{"x": 1}', $3::json) RETURNING id`,
			key, topic, headers).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	good1 := ins("k1", f.Topic, `{"correlation-id": "c-1"}`)
	// Kafka refuses it (not authorized), then the dead-letter topic does too.
	denial := ins("k2", denied, `{"correlation-id": "c-\u0000-2", "note": "nul \u0000 inside"}`)
	// A bad row (no key): straight to the dead-letter topic, which refuses it.
	badRow := ins("", f.Topic, `{"correlation-id": "c-\u0000-3"}`)
	good2 := ins("k1", f.Topic, `{"correlation-id": "c-4"}`)
	end := f.CurrentWAL(t)

	cons.WaitFor(t, 60*time.Second, "the good rows around the bad ones", testenv.HasAll([]int64{good1, good2}))
	type parked struct{ topic, errText, headers string }
	var rows map[string]parked
	const refused = "cannot park dead letters in PostgreSQL"
	testenv.Eventually(t, 60*time.Second, "both dead letters in cdc_relay_dead_letters", func() bool {
		rows = map[string]parked{}
		rs, err := f.Pool.Query(ctx, `SELECT outbox_id, topic, error, headers::text FROM public.cdc_relay_dead_letters WHERE slot = $1`, f.Slot)
		if err == nil {
			for rs.Next() {
				var id string
				var r parked
				if rs.Scan(&id, &r.topic, &r.errText, &r.headers) == nil {
					rows[id] = r
				}
			}
			rs.Close()
		}
		return len(rows) >= 2 || p.Exited() || strings.Count(p.Output(), refused) >= 3
	})
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
	if len(rows) < 2 {
		t.Fatalf("the table refused dead letters %d times (%d of 2 parked): the insert is wedged", strings.Count(p.Output(), refused), len(rows))
	}
	for _, c := range []struct {
		id         int64
		topic, err string
	}{{denial, denied, "TOPIC_AUTHORIZATION_FAILED"}, {badRow, f.Topic, "aggregate_id is NULL"}} {
		r, ok := rows[strconv.FormatInt(c.id, 10)]
		if !ok {
			t.Errorf("outbox id %d is not in cdc_relay_dead_letters (parked: %v)", c.id, rows)
			continue
		}
		if r.topic != c.topic || !strings.Contains(r.errText, c.err) || !strings.Contains(r.errText, "refused it too") {
			t.Errorf("outbox id %d: topic %s, error %q; want topic %s and an error with %q", c.id, r.topic, r.errText, c.topic, c.err)
		}
		if !strings.Contains(r.headers, "correlation-id") {
			t.Errorf("outbox id %d: the row's headers were lost: %s", c.id, r.headers)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the slot to confirm past the dead letter", func() bool { return f.SlotConfirmed(t) >= end })
	if n := strings.Count(p.Output(), refused); n > 0 {
		t.Logf("the table insert failed %d times before it succeeded", n)
	}
	t.Logf("parked: %v", rows)
}
