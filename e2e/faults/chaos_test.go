package faults

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/chaos"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// The chaos soak at CI size (tools/cmd/cdc-chaos; `make chaos` runs 100,000 rows): 6,000 rows in
// random multi-row transactions with rollbacks at a steady rate over 24 s, the relay holding the slot
// (race build) killed -9 3 times with a standby beside it, Kafka paused once, the holder made a
// zombie once (paused past its wal_sender_timeout until the standby took over, then resumed),
// Postgres restarted once. Every committed id is delivered, no rolled-back one is, per key the
// first deliveries are in commit order; duplicates are allowed and counted.
func TestChaosSoakCISize(t *testing.T) {
	res := ciSoak(t, chaos.AtLeastOnce)
	t.Logf("at-least-once: %d duplicates", res.Duplicates)
}

// The same soak with `run --delivery exactly-once`, read read_committed: nothing lost and no
// duplicate either, no record of an aborted transaction read, none written outside a
// transaction. Each kill and the zombie's pause wait until the holder has records of an open
// Kafka transaction written, so they leave aborted transactions behind (a read_uncommitted
// reader counts their records): without them the check would prove nothing.
func TestChaosSoakExactlyOnceCISize(t *testing.T) {
	res := ciSoak(t, chaos.ExactlyOnce)
	if res.Aborted == 0 {
		t.Errorf("no aborted transaction held a record: the kills and the zombie never caught one open, so 0 duplicates proves nothing")
	}
	if !strings.Contains(res.Zombie, "exited") {
		t.Errorf("the zombie: %q, want it to exit once fenced (DESIGN.md, E4)", res.Zombie)
	}
	t.Logf("exactly-once: %d aborted records (%d of them rows delivered by a later commit), %d duplicates", res.Aborted, res.AbortedDelivered, res.Duplicates)
}

// ciSoak runs the CI-size soak with the relay's --delivery and checks its verdict.
func ciSoak(t *testing.T, delivery string) *chaos.Result {
	testenv.CheckControlled(t)
	scripts, err := filepath.Abs("../../scripts")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	res, err := chaos.Run(t.Context(), chaos.Config{
		PGURL:     testenv.PGURL(t),
		Brokers:   testenv.Brokers(t),
		RelayBin:  testenv.Binary(t, true),
		Scripts:   scripts,
		Rows:      6_000,
		Rate:      250,
		KillEvery: 1500 * time.Millisecond,
		MaxKills:  3,
		Pause:     5 * time.Second,
		CatchUp:   2 * time.Minute,
		Delivery:  delivery,
		Name:      testenv.Name(t),
		LogDir:    t.TempDir(),
		Log:       &log,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var out bytes.Buffer
	res.Print(&out)
	t.Log("\n" + log.String() + out.String())
	if err := res.Err(); err != nil {
		dumpRelayLogs(t, res.LogDir)
		t.Fatal(err)
	}
	if res.Kills != 3 || len(res.Takeovers) != 3 {
		t.Errorf("%d kills, %d takeovers, want 3 and 3", res.Kills, len(res.Takeovers))
	}
	faults := map[string]bool{}
	for _, e := range res.Events {
		faults[e.Kind] = true
	}
	for _, f := range []string{"zombie", "kafka-pause", "pg-restart"} {
		if !faults[f] {
			t.Errorf("no %s: the writing ended before it (faults %v)", f, faults)
		}
	}
	if res.Committed != 6_000 || res.RolledBack == 0 {
		t.Errorf("committed %d rows, rolled back %d: not the mix asked for", res.Committed, res.RolledBack)
	}
	return res
}

// dumpRelayLogs logs the warnings and errors of every relay process of the soak (t.TempDir
// goes away with the test).
func dumpRelayLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "relay-*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.HasPrefix(line, "cdc-relay:") {
				t.Logf("%s: %s", filepath.Base(l), line)
			}
		}
	}
}
