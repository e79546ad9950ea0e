package faults

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/chaos"
	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// The chaos soak at CI size (tools/cmd/cdc-chaos; `make chaos` runs 100,000 rows): 5,000 rows in
// random multi-row transactions with rollbacks at a steady rate, the relay (race build) killed
// -9 and restarted 3 times, Kafka paused once, Postgres restarted once. Every committed id is
// delivered, no rolled-back one is, per key the first deliveries are in commit order.
func TestChaosSoakCISize(t *testing.T) {
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
		Rows:      5_000,
		Rate:      500,
		KillEvery: 1500 * time.Millisecond,
		MaxKills:  3,
		Pause:     5 * time.Second,
		CatchUp:   2 * time.Minute,
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
	if res.Kills != 3 {
		t.Errorf("%d kills, want 3", res.Kills)
	}
	if res.Committed != 5_000 || res.RolledBack == 0 {
		t.Errorf("committed %d rows, rolled back %d: not the mix asked for", res.Committed, res.RolledBack)
	}
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
