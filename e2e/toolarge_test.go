package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// The too-large-alone check compared key + value with --max-buffered-bytes, but franz-go counts
// the headers too: a 510 KB payload with 20 KB of headers under --max-buffered-bytes 524288 was
// neither published nor dead-lettered; the relay exited 1 ("not delivered: MESSAGE_TOO_LARGE
// ... uncompressed_bytes=530130"), and every restart did the same, without naming the flag. Now
// it is dead-lettered (here in the table: the letter is as large) with a reason that names the
// limit and the flag, and the rows after it arrive.
func TestRecordTooLargeForTheBufferWithItsHeadersIsDeadLettered(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	ctx := context.Background()
	t.Cleanup(func() {
		_, _ = f.Pool.Exec(context.Background(), `DELETE FROM public.cdc_relay_dead_letters WHERE slot = $1`, f.Slot)
	})
	p := e.Start(t, nil, "--max-buffered-bytes", "524288")
	var bigID int64
	if err := f.Pool.QueryRow(ctx, `INSERT INTO `+f.Table+` (aggregate_id, topic, payload, headers)
		VALUES ('big', $1, to_jsonb(repeat('x', 510000)), jsonb_build_object('big', repeat('h', 20000))) RETURNING id`, f.Topic).Scan(&bigID); err != nil {
		t.Fatal(err)
	}
	after := f.Insert(t, false, testenv.Row{Key: "k", Payload: `{"after":1}`})
	cons := testenv.Consume(t, f.Topic)
	cons.WaitFor(t, 60*time.Second, "the row after the large one", testenv.HasAll(after))
	var reason string
	testenv.Eventually(t, 60*time.Second, "the large record in the dead-letter table", func() bool {
		_ = f.Pool.QueryRow(ctx, `SELECT error FROM public.cdc_relay_dead_letters WHERE slot = $1 AND outbox_id = $2`, f.Slot, strconv.FormatInt(bigID, 10)).Scan(&reason)
		return reason != "" || p.Exited()
	})
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
	if !strings.Contains(reason, "--max-buffered-bytes 524288") || !strings.Contains(reason, "headers") {
		t.Errorf("the dead letter's reason does not name the limit and the flag: %q", reason)
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}
