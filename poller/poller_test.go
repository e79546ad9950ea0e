package poller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/sink"
)

func TestIndexName(t *testing.T) {
	if got := IndexName("public.outbox"); got != "outbox_pending_idx" {
		t.Errorf("got %s", got)
	}
	long := strings.Repeat("x", 63)
	if got := IndexName(long); len(got) != 63 || !strings.HasSuffix(got, "_pending_idx") {
		t.Errorf("got %s (%d bytes)", got, len(got))
	}
}

func TestValidate(t *testing.T) {
	cc, err := pgx.ParseConfig("postgres://x@y/z")
	if err != nil {
		t.Fatal(err)
	}
	ok := Config{Conn: cc, Sink: sink.Config{Brokers: []string{"b:1"}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, mut := range map[string]func(*Config){
		"no conn":      func(c *Config) { c.Conn = nil },
		"no brokers":   func(c *Config) { c.Sink.Brokers = nil },
		"bad table":    func(c *Config) { c.Table = "a.b.c" },
		"huge batch":   func(c *Config) { c.Batch = maxBatch + 1 },
		"neg interval": func(c *Config) { c.Interval = -time.Second },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	d := ok.withDefaults()
	if d.Table != "public.outbox" || d.Batch != 100 || d.Interval != 100*time.Millisecond || d.DLQTopic != "cdc-relay.dlq" ||
		d.Columns.PublishedAt != "published_at" || d.Columns.CreatedAt != "created_at" {
		t.Errorf("defaults: %+v", d)
	}
}

func TestBackoffIsBounded(t *testing.T) {
	p := &Poller{cfg: Config{Interval: 10 * time.Millisecond, MaxBackoff: 5 * time.Second}}
	prev := time.Duration(0)
	for n := 0; n < 100; n++ {
		d := p.backoff().Delay(n)
		if d < 100*time.Millisecond || d > 5*time.Second || d < prev {
			t.Fatalf("backoff(%d) = %s after %s", n, d, prev)
		}
		prev = d
	}
	if prev != 5*time.Second {
		t.Errorf("backoff ends at %s, want the 5s bound", prev)
	}
}

func TestIsRetryable(t *testing.T) {
	for _, err := range []error{ErrUnavailable, errors.New("connection reset")} {
		if !IsRetryable(err) {
			t.Errorf("%v: not retryable", err)
		}
	}
	for _, err := range []error{nil, ErrNoTable, ErrMissingColumn, ErrDeadLetterRefused} {
		if IsRetryable(err) {
			t.Errorf("%v: retryable", err)
		}
	}
}

// A bad row becomes its dead-letter record with the reason the relay gives too, and counts.
func TestBadRowsAreDeadLettered(t *testing.T) {
	p := &Poller{cfg: Config{DLQTopic: "dlq"}.withDefaults(), tbl: outbox.Table{Schema: "public", Name: "outbox"}}
	p.log = p.cfg.Logger
	s := func(v string) *string { return &v }
	ct := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	for _, c := range []struct {
		key, topic *string
		payload    []byte
		headers    *string
		want       error
	}{
		{nil, s("t"), []byte("{}"), nil, outbox.ErrNullKey},
		{s(""), s("t"), []byte("{}"), nil, outbox.ErrEmptyKey},
		{s("k"), nil, []byte("{}"), nil, outbox.ErrNullTopic},
		{s("k"), s(""), []byte("{}"), nil, outbox.ErrEmptyTopic},
		{s("k"), s("t"), nil, nil, outbox.ErrNullPayload},
		{s("k"), s("t"), []byte("{}"), s("[1]"), outbox.ErrBadHeaders},
		{s("k"), s("t"), []byte("{}"), s(`{"outbox-id": "1"}`), outbox.ErrReservedHeader},
		{s("k"), s("t"), []byte("{}"), s(`{"cdc-lsn": "0/1"}`), outbox.ErrReservedHeader},
	} {
		pd := p.record("7", c.key, c.topic, c.payload, nil, c.headers, &ct)
		if !pd.dlq || pd.rec.Topic != "dlq" {
			t.Errorf("%v: not dead-lettered: %+v", c.want, pd.rec)
			continue
		}
		if got := string(record.Header(pd.rec, record.HeaderDLQError)); !strings.Contains(got, c.want.Error()) || !strings.Contains(got, "id 7") {
			t.Errorf("dlq-error %q, want the reason %q and the id", got, c.want)
		}
		if got := string(record.Header(pd.rec, record.HeaderDLQRelation)); got != "public.outbox" {
			t.Errorf("dlq-relation %q", got)
		}
		// The contract's headers appear once: a reserved row header is not carried along.
		n := 0
		for _, h := range pd.rec.Headers {
			if h.Key == record.HeaderOutboxID || h.Key == record.HeaderLSN {
				n++
			}
		}
		if n != 1 || string(record.Header(pd.rec, record.HeaderOutboxID)) != "7" {
			t.Errorf("%v: dead letter headers %v, want outbox-id 7 once and no cdc-lsn", c.want, pd.rec.Headers)
		}
	}
	if n := p.stats.BadRows.Load(); n != 8 {
		t.Errorf("BadRows = %d, want 8", n)
	}
	good := p.record("8", s("k"), s("t"), []byte(`{"a": 1}`), s("e"), s(`{"h": "v"}`), &ct)
	if good.dlq || good.rec.Topic != "t" || string(good.rec.Value) != `{"a": 1}` ||
		string(record.Header(good.rec, record.HeaderCommitTime)) != "2026-01-02T03:04:05.000006Z" ||
		record.Header(good.rec, record.HeaderLSN) != nil || string(record.Header(good.rec, "h")) != "v" ||
		string(record.Header(good.rec, record.HeaderOutboxTable)) != "public.outbox" {
		t.Errorf("good row: %+v", good.rec)
	}
}
