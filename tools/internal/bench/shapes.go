package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The outbox shapes `cdc-bench shapes` compares: the same rows and payload bytes in a plain
// table with a jsonb payload, in a table whose payload is bytea (published as its bytes, which
// the decoder turns back from pgoutput's hex text), and in a table partitioned by range of id
// into ShapePartitions partitions, published through its root.
const (
	ShapePlain       = "plain"
	ShapeBytea       = "bytea"
	ShapePartitioned = "partitioned"
	// ShapePartitions is the number of partitions of the partitioned shape's table.
	ShapePartitions = 4
)

// Shapes are the shapes in the order their drains are interleaved; plain first, the ratios'
// reference.
var Shapes = []string{ShapePlain, ShapeBytea, ShapePartitioned}

// ShapesConfig configures `cdc-bench shapes`. Zero fields take the defaults stated.
type ShapesConfig struct {
	// PGURL and Brokers: default $CDC_RELAY_PG_URL and $CDC_RELAY_BROKERS.
	PGURL   string
	Brokers []string
	// Rows is the backlog of each shape. Default 100,000.
	Rows int
	// Payload is each row's payload size, bytes (a JSON document of about that size; the
	// bytea shape holds its text's bytes). Default 512.
	Payload int
	// TxSize is the rows per transaction the backlogs are written with. Default 100.
	TxSize int
	// Repeats is the drains of each shape, interleaved; the table gives the median. Default 3.
	Repeats int
	// OutDir receives table.md and the publishers' logs (logs/). Required.
	OutDir string
	// RelayBin is the cdc-relay binary. Default: built from this module into a temp dir.
	RelayBin string
	// Progress receives the progress lines. Default os.Stderr.
	Progress io.Writer
	// DrainTimeout bounds each drain. Default 2 minutes.
	DrainTimeout time.Duration
}

func (c ShapesConfig) withDefaults() ShapesConfig {
	orDefault(&c.Rows, 100_000)
	orDefault(&c.Payload, 512)
	orDefault(&c.TxSize, 100)
	orDefault(&c.Repeats, 3)
	orDefault(&c.DrainTimeout, 2*time.Minute)
	if c.Progress == nil {
		c.Progress = os.Stderr
	}
	return c
}

// Validate reports a configuration that cannot run (after defaults).
func (c ShapesConfig) Validate() error {
	c = c.withDefaults()
	errs := Config{PGURL: c.PGURL, Brokers: c.Brokers, OutDir: c.OutDir}.withDefaults().placeErrs()
	if c.Rows < 0 || c.Payload < 0 || c.TxSize < 0 || c.Repeats < 0 {
		errs = append(errs, errors.New("bench: rows, payload, transaction size and repeats must be positive"))
	}
	if c.Rows > 0 && c.Rows < ShapePartitions {
		errs = append(errs, fmt.Errorf("bench: rows %d: want at least %d, one per partition of the partitioned shape", c.Rows, ShapePartitions))
	}
	return errors.Join(errs...)
}

// ShapesResult is what `cdc-bench shapes` measured: each shape's median drain (its
// BacklogResult's Publisher is the shape's name).
type ShapesResult struct {
	Rows, Payload, TxSize, Repeats int
	Shapes                         []BacklogResult
	// Prefix starts the name of every table, slot, publication and topic the run made.
	Prefix string
}

// RunShapes writes cfg.Rows rows of each shape with no publisher running, then times
// `cdc-relay run` draining each, Repeats times, interleaved in a rotating order, each drain
// on a slot of its own made just before its shape's rows were written. It removes its tables, slots,
// publications and topics before it returns.
func RunShapes(ctx context.Context, cfg ShapesConfig) (*ShapesResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	bc := Config{PGURL: cfg.PGURL, Brokers: cfg.Brokers, OutDir: cfg.OutDir, RelayBin: cfg.RelayBin, Progress: cfg.Progress,
		DrainTimeout: cfg.DrainTimeout, Repeats: cfg.Repeats, SkipSteady: true, SkipReplay: true}.withDefaults()
	e, done, err := openEnv(ctx, &bc, "tables, slots, publications and topics")
	if err != nil {
		return nil, err
	}
	defer done()

	n, reps := cfg.Rows, cfg.Repeats
	fixtures := map[string]*fixture{}
	slots := map[string][]string{}
	for _, shape := range Shapes {
		f, err := e.newShapeFixture(ctx, shape, n)
		if err != nil {
			return nil, err
		}
		fixtures[shape] = f
		// This shape's slots start just before its rows: no drain decodes another shape's
		// backlog before reaching its own.
		for k := 0; k < reps; k++ {
			slot := fmt.Sprintf("%s_%d", f.base, k)
			if err := e.createRelaySlot(ctx, f, slot); err != nil {
				return nil, err
			}
			slots[shape] = append(slots[shape], slot)
		}
		phase := fmt.Sprintf("shape %s: %d rows of %d-byte payloads in %d-row transactions", shape, n, cfg.Payload, cfg.TxSize)
		e.progress("%s: writing", phase)
		start := time.Now()
		if err := e.writeShape(ctx, f, shape, n, cfg.TxSize, cfg.Payload); err != nil {
			return nil, err
		}
		e.progress("%s: written in %.1fs", phase, time.Since(start).Seconds())
	}

	runs := map[string][]drainRun{}
	for k := 0; k < reps; k++ {
		// Rotate the order each round (plain, bytea, partitioned; bytea, partitioned, plain;
		// ...), so that no shape always goes first: the run's first drain is slower (it
		// builds what the later walsenders find ready).
		for i := range Shapes {
			shape := Shapes[(i+k)%len(Shapes)]
			f := fixtures[shape]
			label := fmt.Sprintf("shape %s (%d/%d)", shape, k+1, reps)
			topic := fmt.Sprintf("%s.run.%d", f.topic, k)
			if err := e.createTopic(ctx, topic); err != nil {
				return nil, err
			}
			r, err := e.drain(ctx, label, Publisher{Name: "run"}, f, slots[shape][k], topic, n)
			if err != nil {
				return nil, fmt.Errorf("shape %s: %w", shape, err)
			}
			runs[shape] = append(runs[shape], r)
			e.dropSlot(ctx, slots[shape][k]) // drained: its WAL is no longer needed
			if k == 0 {
				if err := e.checkShapeRecord(ctx, shape, topic); err != nil {
					return nil, err
				}
			}
		}
	}
	res := &ShapesResult{Rows: n, Payload: cfg.Payload, TxSize: cfg.TxSize, Repeats: reps, Prefix: e.prefix}
	for _, shape := range Shapes {
		r := summarize(shape, cfg.TxSize, n, runs[shape])
		r.Payload = cfg.Payload
		res.Shapes = append(res.Shapes, r)
	}
	if err := os.WriteFile(filepath.Join(bc.OutDir, "table.md"), []byte(res.Markdown()), 0o644); err != nil {
		return res, err
	}
	return res, nil
}

// newShapeFixture creates the shape's outbox table (the columns the relay reads by default,
// as newFixture's) and its topics (the rows' and the dead letters'), removed at close.
func (e *env) newShapeFixture(ctx context.Context, shape string, n int) (*fixture, error) {
	base := e.nextBase("shape_" + shape)
	f := &fixture{base: base, outbox: "public." + base, topic: base + ".events"}
	e.onClose(func(ctx context.Context) { _, _ = e.pool.Exec(ctx, `DROP TABLE IF EXISTS `+f.outbox) })
	payload := "JSONB"
	if shape == ShapeBytea {
		payload = "BYTEA"
	}
	ddl := `CREATE TABLE ` + f.outbox + ` (
    id            BIGSERIAL    PRIMARY KEY,
    aggregate_id  TEXT         NOT NULL,
    topic         TEXT         NOT NULL,
    payload       ` + payload + `  NOT NULL,
    created_at    TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    published_at  TIMESTAMPTZ  NULL
)`
	if shape == ShapePartitioned {
		ddl += ` PARTITION BY RANGE (id)`
		for _, p := range partitionBounds(n, ShapePartitions) {
			ddl += fmt.Sprintf(";\nCREATE TABLE %s_p%d PARTITION OF %s FOR VALUES FROM (%s) TO (%s)", f.outbox, p.i, f.outbox, p.from, p.to)
		}
	}
	if err := e.createFixture(ctx, f, ddl); err != nil {
		return nil, err
	}
	return f, nil
}

type partitionBound struct {
	i        int
	from, to string
}

// partitionBounds splits ids 1..n into parts ranges of about equal size, the first from
// MINVALUE and the last to MAXVALUE.
func partitionBounds(n, parts int) []partitionBound {
	out := make([]partitionBound, parts)
	for i := range out {
		out[i] = partitionBound{i: i, from: "MINVALUE", to: "MAXVALUE"}
		if i > 0 {
			out[i].from = fmt.Sprint(1 + i*n/parts)
		}
		if i < parts-1 {
			out[i].to = fmt.Sprint(1 + (i+1)*n/parts)
		}
	}
	return out
}

// writeShape writes n rows in transactions of txSize with server-side loops (a DO block that
// commits after each transaction), synchronous_commit off, then waits until the WAL is
// flushed (a walsender sends only flushed WAL: the first drain would pay for it). Each payload
// is a JSON document with a field of random hex characters, payload bytes in all; the bytea
// shape holds that document's text as bytes.
func (e *env) writeShape(ctx context.Context, f *fixture, shape string, n, txSize, payload int) error {
	tx := func(size int) string { return shapeTx(f, shape, size, payload) }
	if err := loopLoad(ctx, e.pool, n, txSize, max(txSize, 10_000/txSize*txSize), tx); err != nil {
		return fmt.Errorf("bench: write backlog into %s: %w", f.outbox, err)
	}
	_, err := e.waitFlushed(ctx)
	return err
}

// shapeTx is one transaction of a shape's backlog: size rows whose payloads are a JSON
// document of about payload bytes (random hex, so that neither TOAST nor Kafka compression
// makes them cheaper than a real document), jsonb or, for bytea, the document's text.
func shapeTx(f *fixture, shape string, size, payload int) string {
	// {"blob": "…", "event": "order.created", "order_id": N} is about 50 bytes besides the blob.
	doc := fmt.Sprintf(`jsonb_build_object('event', 'order.created', 'order_id', g, 'blob', (SELECT string_agg(md5(random()::text || g || g2), '') FROM generate_series(1, %d) g2))`,
		max(1, (payload-50+31)/32))
	if shape == ShapeBytea {
		doc = `convert_to((` + doc + `)::text, 'UTF8')`
	}
	return fmt.Sprintf(`INSERT INTO %s (aggregate_id, topic, payload) SELECT 'order-' || g, '%s', %s FROM generate_series(1, %d) g`,
		f.outbox, f.topic, doc, size)
}

// Markdown is the shapes' table: each shape's median drain, its rate and the ratio of that
// to plain's, the relay's CPU per 10,000 rows, and whether the machine was busy during any of
// its drains (MachineState).
func (r *ShapesResult) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Outbox shapes: %d rows of %d-byte payloads in %d-row transactions, median of %d drains\n\n",
		r.Rows, r.Payload, r.TxSize, r.Repeats)
	b.WriteString("| shape | rows | median drain s | rows/s | × plain | relay CPU s / 10,000 rows | machine busy |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---|\n")
	var plain float64
	for _, s := range r.Shapes {
		if s.Publisher == ShapePlain {
			plain = s.Rate
		}
	}
	for _, s := range r.Shapes {
		ratio := "–"
		if plain > 0 {
			ratio = fmt.Sprintf("%.2f", s.Rate/plain)
		}
		cpu := "–"
		if s.Rows > 0 {
			cpu = fmt.Sprintf("%.3f", s.CPU.Seconds()*10_000/float64(s.Rows))
		}
		busy := "no"
		if s.Machine != nil && s.Machine.Busy {
			busy = "**yes**: " + s.Machine.Why
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.0f | %s | %s | %s |\n", s.Publisher, s.Rows, s.Elapsed.Seconds(), s.Rate, ratio, cpu, busy)
	}
	return b.String()
}

// checkShapeRecord reads the first record of a drain's topic and checks that its value is the
// row's JSON document, whatever the shape: a bytea payload published as its hex text (or a
// partitioned table's rows not published at all) would make the table compare something else.
func (e *env) checkShapeRecord(ctx context.Context, shape, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.cfg.Brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("bench: consumer: %w", err)
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollRecords(cctx, 1)
		if err := cctx.Err(); err != nil {
			return fmt.Errorf("bench: shape %s: no record read back from %s: %w", shape, topic, err)
		}
		var rec *kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if rec == nil {
				rec = r
			}
		})
		if rec == nil {
			continue
		}
		var doc struct {
			Event string `json:"event"`
			Blob  string `json:"blob"`
		}
		if err := json.Unmarshal(rec.Value, &doc); err != nil || doc.Event != "order.created" || doc.Blob == "" {
			return fmt.Errorf("bench: shape %s: the record's value is not the row's JSON document (%v): %.80q", shape, err, rec.Value)
		}
		return nil
	}
}
