package schema

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// codec turns a JSON payload into the bytes after the wire-format header (and its message
// indexes, for Protobuf). Its errors are what does not fit; the caller wraps them.
type codec interface {
	encode(dst, payload []byte) ([]byte, error)
}

// ValueEncoder is what a publisher needs of an Encoder: run's and poll's --value-format (tests
// give their own).
type ValueEncoder interface {
	Encode(ctx context.Context, topic, eventType string, payload []byte) ([]byte, error)
}

// Encoder turns JSON payloads into wire-format values. Safe for concurrent use.
type Encoder struct {
	cfg    Config
	cl     *sr.Client
	maxAge time.Duration
	now    func() time.Time

	mu       sync.Mutex
	subjects map[string]*subjectEntry
	ids      map[int]*idEntry // schema ids met in wire-format payloads

	calls int64 // registry requests made, for tests and metrics
}

type subjectEntry struct {
	mu      sync.Mutex // held while the subject is looked up
	loaded  bool
	fetched time.Time
	id      int
	codec   codec
}

type idEntry struct {
	known   bool
	fetched time.Time
}

// unknownIDAge is how long an id the registry did not know stays unknown before it is asked again.
const unknownIDAge = 30 * time.Second

// New checks cfg and returns an Encoder. It makes no registry call: Check does, at start.
// Its errors are a *ConfigError.
func New(cfg Config) (*Encoder, error) {
	cl, err := cfg.client()
	if err != nil {
		return nil, err
	}
	cfg.Strategy, _ = ParseStrategy(string(cfg.Strategy))
	cfg.Format, _ = ParseFormat(string(cfg.Format))
	maxAge := cfg.MaxAge
	if maxAge <= 0 {
		maxAge = 5 * time.Minute
	}
	return &Encoder{cfg: cfg, cl: cl, maxAge: maxAge, now: time.Now,
		subjects: map[string]*subjectEntry{}, ids: map[int]*idEntry{}}, nil
}

// Subject is the subject of a value written to topic for a row of eventType.
func (e *Encoder) Subject(topic, eventType string) string {
	if e.cfg.Strategy == StrategyRecord {
		return eventType
	}
	return topic + "-value"
}

// RegistryCalls is how many requests the Encoder has sent to the registry.
func (e *Encoder) RegistryCalls() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls
}

func (e *Encoder) called() {
	e.mu.Lock()
	e.calls++
	e.mu.Unlock()
}

// Check looks up each subject now (and caches it), for a start that fails fast: an unknown
// subject or refused credentials is a *ConfigError, a registry that does not answer an
// *UnavailableError. In the wire format it only checks that the registry answers.
func (e *Encoder) Check(ctx context.Context, subjects ...string) error {
	if e.cfg.Format == FormatWire || len(subjects) == 0 {
		e.called()
		if _, err := e.cl.Subjects(ctx); err != nil {
			return classify("", err)
		}
		return nil
	}
	var errs []error
	for _, s := range subjects {
		if _, _, err := e.schemaOf(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Encode returns payload, a JSON document (the wire format's bytes in FormatWire), as the
// wire-format value of a record for topic and eventType: magic byte 0, the schema id (4 bytes,
// big-endian), for Protobuf the message indexes, then the encoded value. Its errors are a
// *PayloadError (a bad row), an *UnavailableError (a fault: retry later) or a *ConfigError.
func (e *Encoder) Encode(ctx context.Context, topic, eventType string, payload []byte) ([]byte, error) {
	subject := e.Subject(topic, eventType)
	if subject == "" {
		return nil, &PayloadError{Format: e.cfg.Format,
			Err: errors.New("the row has no event type, which names the subject under the record name strategy")}
	}
	if e.cfg.Format == FormatWire {
		return e.checkWire(ctx, subject, payload)
	}
	id, c, err := e.schemaOf(ctx, subject)
	if err != nil {
		return nil, err
	}
	out, _ := (&sr.ConfluentHeader{}).AppendEncode(make([]byte, 0, len(payload)+8), id, nil)
	out, err = c.encode(out, payload)
	if err != nil {
		return nil, &PayloadError{Subject: subject, SchemaID: id, Format: e.cfg.Format, Err: err}
	}
	return out, nil
}

// schemaOf returns the subject's schema id and codec: cached, else looked up (or registered)
// once. A cached entry older than MaxAge is looked up again; if that fails it is used as it is.
func (e *Encoder) schemaOf(ctx context.Context, subject string) (int, codec, error) {
	e.mu.Lock()
	ent := e.subjects[subject]
	if ent == nil {
		ent = &subjectEntry{}
		e.subjects[subject] = ent
	}
	e.mu.Unlock()

	ent.mu.Lock()
	defer ent.mu.Unlock()
	if ent.loaded && e.now().Sub(ent.fetched) < e.maxAge {
		return ent.id, ent.codec, nil
	}
	id, c, err := e.load(ctx, subject, ent)
	if err != nil {
		if ent.loaded {
			ent.fetched = e.now() // stale but usable: ask again after another MaxAge
			return ent.id, ent.codec, nil
		}
		return 0, nil, err
	}
	ent.loaded, ent.fetched, ent.id, ent.codec = true, e.now(), id, c
	return id, c, nil
}

func (e *Encoder) load(ctx context.Context, subject string, old *subjectEntry) (int, codec, error) {
	var ss sr.SubjectSchema
	if local, ok := e.cfg.Schemas[subject]; ok && e.cfg.Register {
		e.called()
		id, err := e.cl.RegisterSchema(ctx, subject, local, -1, -1)
		if err != nil {
			return 0, nil, e.lookupErr(subject, err)
		}
		ss = sr.SubjectSchema{Subject: subject, ID: id, Schema: local}
	} else {
		e.called()
		var err error
		ss, err = e.cl.SchemaByVersion(ctx, subject, -1)
		if err != nil {
			return 0, nil, e.lookupErr(subject, err)
		}
	}
	if old.loaded && old.id == ss.ID {
		return old.id, old.codec, nil
	}
	if ss.Type != e.cfg.Format.srType() {
		return 0, nil, &ConfigError{Subject: subject,
			Err: fmt.Errorf("schema id %d is %s, the relay writes %s", ss.ID, ss.Type, e.cfg.Format)}
	}
	if len(ss.References) > 0 {
		return 0, nil, &ConfigError{Subject: subject,
			Err: fmt.Errorf("schema id %d has references to other subjects, which are not supported", ss.ID)}
	}
	c, err := e.compile(subject, ss.Schema.Schema)
	if err != nil {
		return 0, nil, &ConfigError{Subject: subject, Err: fmt.Errorf("schema id %d: %w", ss.ID, err)}
	}
	return ss.ID, c, nil
}

func (e *Encoder) lookupErr(subject string, err error) error {
	if notFound(err) {
		return &ConfigError{Subject: subject, Err: err,
			Hint: "register the subject's schema in the registry (or turn registering on), or check the subject strategy"}
	}
	return classify(subject, err)
}

func (e *Encoder) compile(subject, text string) (codec, error) {
	switch e.cfg.Format {
	case FormatAvro:
		return newAvroCodec(text)
	case FormatProtobuf:
		msg := e.cfg.ProtobufMessage
		preferred := ""
		if msg == "" && e.cfg.Strategy == StrategyRecord {
			preferred = subject
		}
		return newProtoCodec(text, msg, preferred)
	case FormatJSONSchema:
		return newJSONSchemaCodec(text)
	}
	return nil, fmt.Errorf("format %s has no codec", e.cfg.Format)
}

// checkWire returns payload if it is in the wire format with a schema id the registry knows.
func (e *Encoder) checkWire(ctx context.Context, subject string, payload []byte) ([]byte, error) {
	id, _, err := (&sr.ConfluentHeader{}).DecodeID(payload)
	if err != nil {
		return nil, &PayloadError{Subject: subject, Format: FormatWire,
			Err: errors.New("not in the wire format: it needs magic byte 0 and a 4-byte schema id")}
	}
	e.mu.Lock()
	ent := e.ids[id]
	e.mu.Unlock()
	if ent != nil && (ent.known || e.now().Sub(ent.fetched) < unknownIDAge) {
		if !ent.known {
			return nil, unknownID(subject, id)
		}
		return payload, nil
	}
	e.called()
	_, err = e.cl.SchemaByID(ctx, id)
	switch {
	case err == nil:
		e.mu.Lock()
		e.ids[id] = &idEntry{known: true, fetched: e.now()}
		e.mu.Unlock()
		return payload, nil
	case notFound(err):
		e.mu.Lock()
		e.ids[id] = &idEntry{fetched: e.now()}
		e.mu.Unlock()
		return nil, unknownID(subject, id)
	}
	return nil, classify(subject, err)
}

func unknownID(subject string, id int) error {
	return &PayloadError{Subject: subject, SchemaID: id, Format: FormatWire,
		Err: fmt.Errorf("schema id %d is not known to the registry", id)}
}
