package decoder

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cdc-relay/cdc-relay/internal/contract"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// profile holds the settings that make the decoder's events those of another publisher
// (outbox.Profile): a topic named by a template of columns, the outbox id as one more header.
// (The profile's NULL payload as a tombstone is Config.NullPayload.)
type profile struct {
	tmpl     *outbox.TopicTemplate
	idHeader string
	tvals    [][]byte // scratch: the template's column values of the current row
	tbuf     []byte   // scratch: the topic being built
}

// validateProfile reports a malformed TopicTemplate, one given with Topic, or a reserved IDHeader.
func (c Config) validateProfile() error {
	if c.TopicTemplate != "" {
		if c.Topic != "" {
			return errors.New("decoder: TopicTemplate and Topic are exclusive: a template names each row's topic, Topic one for all")
		}
		if _, err := outbox.ParseTopicTemplate(c.TopicTemplate); err != nil {
			return fmt.Errorf("decoder: %w", err)
		}
	}
	if c.IDHeader != "" && contract.Reserved(c.IDHeader) {
		return fmt.Errorf("decoder: IDHeader %q: %w", c.IDHeader, contract.ErrReserved)
	}
	return nil
}

func newProfile(cfg Config) profile {
	p := profile{idHeader: cfg.IDHeader}
	if cfg.TopicTemplate != "" {
		t, _ := outbox.ParseTopicTemplate(cfg.TopicTemplate) // checked by Validate
		p.tmpl = &t
		p.tvals = make([][]byte, len(t.Columns()))
	}
	return p
}

// templateCols returns a new relation's template column indexes, all missing until match.
func (p *profile) templateCols() []int {
	if p.tmpl == nil {
		return nil
	}
	cols := make([]int, len(p.tmpl.Columns()))
	for i := range cols {
		cols[i] = -1
	}
	return cols
}

// match records that tuple index i of rel is the column named col.
func (p *profile) match(rel *relation, i int, col []byte) {
	if p.tmpl == nil {
		return
	}
	for j, want := range p.tmpl.Columns() {
		if rel.tcol[j] < 0 && string(col) == want {
			rel.tcol[j] = i
		}
	}
}

// templateTopic builds the row's topic from the template; a missing, NULL, binary or empty
// placeholder column is recorded in bad.
func (d *Decoder) templateTopic(vals []value, rel *relation, bad *problem) string {
	p := &d.prof
	for j, i := range rel.tcol {
		col := p.tmpl.Columns()[j]
		p.tvals[j] = nil
		switch {
		case i < 0:
			bad.set(col, outbox.ErrMissingColumn)
		case vals[i].kind == 't' && len(vals[i].data) == 0:
			bad.set(col, outbox.ErrEmptyTopic)
		case vals[i].kind == 't':
			p.tvals[j] = vals[i].data
		case vals[i].kind == 'b':
			bad.set(col, outbox.ErrBinaryValue)
		default:
			bad.set(col, outbox.ErrNullTopic)
		}
	}
	p.tbuf = p.tmpl.Append(p.tbuf[:0], p.tvals)
	clear(p.tvals) // drop the references to data
	return d.lastTopic.string(p.tbuf)
}

// addIDHeader adds the IDHeader carrying the outbox id, keeping ev.Headers sorted by key. A
// row whose own headers already use that name is a bad row: two would shadow each other.
func (p *profile) addIDHeader(ev *outbox.Event, headersCol string, bad *problem) {
	if p.idHeader == "" || ev.ID == "" {
		return
	}
	for _, h := range ev.Headers {
		if strings.EqualFold(h.Key, p.idHeader) {
			bad.set(headersCol, fmt.Errorf("headers: %q is the profile's id header: %w", h.Key, outbox.ErrReservedHeader))
			return
		}
	}
	i, _ := slices.BinarySearchFunc(ev.Headers, p.idHeader, func(h outbox.Header, k string) int { return strings.Compare(h.Key, k) })
	ev.Headers = slices.Insert(ev.Headers, i, outbox.Header{Key: p.idHeader, Value: []byte(ev.ID)})
}
