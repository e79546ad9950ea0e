package poller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/sink"
)

func TestParseHeadersMatchesTheDecoder(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // k=v;... in order
		bad  bool
	}{
		{`{"b": "x", "a": 1, "c": {"d": [1, 2]}, "e": null, "f": "a\"b\u00e9"}`, `a=1;b=x;c={"d": [1, 2]};e=null;f=a"bé`, false},
		{`null`, ``, false},
		{`{}`, ``, false},
		{`  {"k": "v"}  `, `k=v`, false},
		{`[1]`, ``, true},
		{`"s"`, ``, true},
		{`{"k": `, ``, true},
		{`{"outbox_id": "1", "x-cdc-lsn": "2"}`, `outbox_id=1;x-cdc-lsn=2`, false},
	} {
		hs, err := parseHeaders([]byte(c.in))
		if c.bad {
			if !errors.Is(err, decoder.ErrBadHeaders) {
				t.Errorf("%s: got %v, want ErrBadHeaders", c.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		var got []string
		for _, h := range hs {
			got = append(got, h.Key+"="+string(h.Value))
		}
		if strings.Join(got, ";") != c.want {
			t.Errorf("%s: got %q, want %q", c.in, strings.Join(got, ";"), c.want)
		}
	}
}

// The decoder's rule for reserved names, with the decoder's reason (issue 10, defect 7).
func TestParseHeadersRefusesReservedNames(t *testing.T) {
	for in, want := range map[string]string{
		`{"outbox-id": "1"}`:                          `headers: "outbox-id" is reserved by the record contract`,
		`{"cdc-lsn": "0/1", "k": "v"}`:                `headers: "cdc-lsn" is reserved by the record contract`,
		`{"Outbox-Table": "x", "dlq-error": "e"}`:     `headers: "Outbox-Table", "dlq-error" are reserved by the record contract`,
		`{"aggregate-id": 1, "event-type": "e"}`:      `headers: "aggregate-id", "event-type" are reserved by the record contract`,
		`{"cdc-commit-time": "t", "dlq-whatever": 1}`: `headers: "cdc-commit-time", "dlq-whatever" are reserved by the record contract`,
	} {
		hs, err := parseHeaders([]byte(in))
		if !errors.Is(err, decoder.ErrReservedHeader) || err.Error() != want {
			t.Errorf("%s: got %v, want %s", in, err, want)
		}
		for _, h := range hs {
			if sink.ReservedHeader(h.Key) {
				t.Errorf("%s: reserved header %q kept", in, h.Key)
			}
		}
	}
	if hs, _ := parseHeaders([]byte(`{"cdc-lsn": "0/1", "k": "v"}`)); len(hs) != 1 || hs[0].Key != "k" {
		t.Errorf("the other headers are not kept for the dead letter: %v", hs)
	}
}

func TestParseTable(t *testing.T) {
	for in, want := range map[string]string{"outbox": `"public"."outbox"`, "app.outbox": `"app"."outbox"`, "Weird.Name": `"Weird"."Name"`} {
		tb, err := parseTable(in)
		if err != nil || tb.sanitize() != want {
			t.Errorf("%s: %s, %v; want %s", in, tb.sanitize(), err, want)
		}
	}
	for _, in := range []string{"", ".", "a.", ".b", "a.b.c"} {
		if _, err := parseTable(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

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

// A bad row becomes its dead-letter record with the decoder's reason, and counts.
func TestBadRowsAreDeadLettered(t *testing.T) {
	p := &Poller{cfg: Config{DLQTopic: "dlq"}.withDefaults(), tbl: table{"public", "outbox"}}
	p.log = p.cfg.Logger
	s := func(v string) *string { return &v }
	ct := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	for _, c := range []struct {
		key, topic, payload, headers *string
		want                         error
	}{
		{nil, s("t"), s("{}"), nil, decoder.ErrNullKey},
		{s(""), s("t"), s("{}"), nil, decoder.ErrEmptyKey},
		{s("k"), nil, s("{}"), nil, decoder.ErrNullTopic},
		{s("k"), s(""), s("{}"), nil, decoder.ErrEmptyTopic},
		{s("k"), s("t"), nil, nil, decoder.ErrNullPayload},
		{s("k"), s("t"), s("{}"), s("[1]"), decoder.ErrBadHeaders},
		{s("k"), s("t"), s("{}"), s(`{"outbox-id": "1"}`), decoder.ErrReservedHeader},
		{s("k"), s("t"), s("{}"), s(`{"cdc-lsn": "0/1"}`), decoder.ErrReservedHeader},
	} {
		pd := p.record("7", c.key, c.topic, c.payload, nil, c.headers, &ct)
		if !pd.dlq || pd.rec.Topic != "dlq" {
			t.Errorf("%v: not dead-lettered: %+v", c.want, pd.rec)
			continue
		}
		if got := string(sink.Header(pd.rec, sink.HeaderDLQError)); !strings.Contains(got, c.want.Error()) || !strings.Contains(got, "id 7") {
			t.Errorf("dlq-error %q, want the reason %q and the id", got, c.want)
		}
		if got := string(sink.Header(pd.rec, sink.HeaderDLQRelation)); got != "public.outbox" {
			t.Errorf("dlq-relation %q", got)
		}
		// The contract's headers appear once: a reserved row header is not carried along.
		n := 0
		for _, h := range pd.rec.Headers {
			if h.Key == sink.HeaderOutboxID || h.Key == sink.HeaderLSN {
				n++
			}
		}
		if n != 1 || string(sink.Header(pd.rec, sink.HeaderOutboxID)) != "7" {
			t.Errorf("%v: dead letter headers %v, want outbox-id 7 once and no cdc-lsn", c.want, pd.rec.Headers)
		}
	}
	if n := p.stats.BadRows.Load(); n != 8 {
		t.Errorf("BadRows = %d, want 8", n)
	}
	good := p.record("8", s("k"), s("t"), s(`{"a": 1}`), s("e"), s(`{"h": "v"}`), &ct)
	if good.dlq || good.rec.Topic != "t" || string(good.rec.Value) != `{"a": 1}` ||
		string(sink.Header(good.rec, sink.HeaderCommitTime)) != "2026-01-02T03:04:05.000006Z" ||
		sink.Header(good.rec, sink.HeaderLSN) != nil || string(sink.Header(good.rec, "h")) != "v" ||
		string(sink.Header(good.rec, sink.HeaderOutboxTable)) != "public.outbox" {
		t.Errorf("good row: %+v", good.rec)
	}
}
