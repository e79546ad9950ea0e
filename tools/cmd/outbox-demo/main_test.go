package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/testkit/build"
	runner "github.com/cdc-relay/cdc-relay/testkit/proc"
)

// The demo's orders go through a running relay on the local services; the warm-up orders are
// written and read back first and reported apart, so the latency it prints is a running
// pipeline's, not the cold path's of a fresh relay, broker and consumer, and every order,
// warm-up or measured, must arrive. It fails, never skips, when the services are missing.
func TestOrdersReportTheWarmUpApart(t *testing.T) {
	pgURL, brokers := os.Getenv("CDC_RELAY_PG_URL"), os.Getenv("CDC_RELAY_BROKERS")
	if pgURL == "" || brokers == "" {
		t.Fatal(`CDC_RELAY_PG_URL and CDC_RELAY_BROKERS must be set: run: eval "$(scripts/dev-up.sh)"`)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := build.Relay(ctx, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("demo_test_%d", time.Now().UnixNano()%1_000_000_000)
	topic := name + ".orders"
	if err := setup(ctx, pgURL, brokers, topic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), pgURL)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for i := 0; i < 50; i++ { // the relay's walsender may still hold the slot for a moment
			if _, err := conn.Exec(context.Background(), `SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1`, name); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = conn.Exec(context.Background(), `DROP PUBLICATION IF EXISTS `+name)
	})
	if out, err := exec.CommandContext(ctx, bin, "slot", "create", "--pg-url", pgURL, "--slot", name, "--publication", name, "--table", "public.outbox").CombinedOutput(); err != nil {
		t.Fatalf("slot create: %v\n%s", err, out)
	}
	// As scripts/demo.sh runs it: --create-topics makes the dead-letter topic, which a fresh
	// broker does not have.
	var log runner.Buffer
	relay, err := runner.Start(&log, nil, bin, "run", "--pg-url", pgURL, "--brokers", brokers, "--slot", name, "--publication", name,
		"--metrics-addr", "127.0.0.1:0", "--create-topics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := relay.Stop(30 * time.Second); err != nil {
			t.Errorf("relay: %v\n%s", err, log.String())
		}
	}()

	// A relay that exits ends the orders at once, with its log, rather than at their timeout.
	octx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go func() {
		select {
		case <-relay.Done():
			stop(fmt.Errorf("the relay exited: %v", relay.Err()))
		case <-octx.Done():
		}
	}()
	var out bytes.Buffer
	if err := orders(octx, &out, pgURL, brokers, topic, 30, 5, 200, time.Minute); err != nil {
		t.Fatalf("orders: %v (%v)\n%s\nthe relay's log:\n%s", err, context.Cause(octx), out.String(), log.String())
	}
	for _, want := range []string{
		"warm-up, 5 orders one at a time (cold connections, metadata, first fetch): first ",
		"rows in outbox (this run):      30 measured (+5 warm-up)\n",
		"records on the topic (this run): 30\n",
		"distinct outbox ids received:   30\n",
		" (after the warm-up)\n",
		"OK: every committed outbox row reached Kafka\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output has no %q:\n%s", want, out.String())
		}
	}
	if i, j := strings.Index(out.String(), "warm-up, "), strings.Index(out.String(), "wrote 30 orders"); i < 0 || j < i {
		t.Errorf("the warm-up is not reported before the measured orders:\n%s", out.String())
	}
}
