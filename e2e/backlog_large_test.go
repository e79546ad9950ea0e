package e2e

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// A backlog of 10 KB rows is drained in the large pieces of DESIGN.md, "Reading a backlog"
// (reads of up to 256 KiB through the relay's own read buffer, under pgconn's reused ones):
// every row arrives with exactly the payload it was committed with, none shares another's
// bytes, and a small row written once the backlog is drained still arrives.
func TestLargeRowBacklogArrivesIntact(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	const txns, perTx, pad = 150, 10, 320 // 1,500 rows of 10 KB (md5 hex, 32 bytes, 320 times), 10 a transaction
	var ids []int64
	for i := range txns {
		rows := make([]testenv.Row, perTx)
		for j := range rows {
			g := i*perTx + j
			rows[j] = testenv.Row{Key: "k" + strconv.Itoa(g%7), Payload: `{"g": ` + strconv.Itoa(g) + `, "pad": "` + padOf(g, pad) + `"}`}
		}
		ids = append(ids, e.F.Insert(t, false, rows...)...)
	}
	e.Start(t, nil)
	cons := testenv.Consume(t, e.F.Topic)
	recs := cons.WaitFor(t, 180*time.Second, "the 1,500 large rows", hasAll(ids))
	seen := map[int]bool{}
	for _, r := range recs {
		var v struct {
			G   int    `json:"g"`
			Pad string `json:"pad"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record %s: value is not the row's JSON (%v): %.60q", testenv.Header(r, "outbox-id"), err, r.Value)
		}
		if want := padOf(v.G, pad); v.Pad != want {
			t.Fatalf("row g=%d: its payload's pad is not the one committed (%d bytes, want %d): bytes of another row", v.G, len(v.Pad), len(want))
		}
		if want := "k" + strconv.Itoa(v.G%7); string(r.Key) != want {
			t.Fatalf("row g=%d: key %q, want %q", v.G, r.Key, want)
		}
		seen[v.G] = true
	}
	if len(seen) != txns*perTx {
		t.Fatalf("%d distinct rows, want %d", len(seen), txns*perTx)
	}
	late := insertAged(t, e.F, 1, 0, false)
	cons.WaitFor(t, 30*time.Second, "a small row written after the backlog", hasAll(late))
}

// padOf is row g's filler: the md5 of its number in hex, n times, so that no two rows share it.
func padOf(g, n int) string {
	sum := md5.Sum([]byte(strconv.Itoa(g)))
	return strings.Repeat(hex.EncodeToString(sum[:]), n)
}
