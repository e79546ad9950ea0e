package deadletters

import (
	"fmt"
	"strings"
	"time"
)

// Selection chooses letters. Every field set must match; an empty selection matches every
// letter that waits (and, with Handled, the replayed and discarded ones too).
type Selection struct {
	IDs       []string // letter ids: "partition:offset" (topic) or the row id (table)
	OutboxIDs []string
	Topic     string // the original topic, exactly
	Reason    string // a substring of the error, case-insensitive
	Since     time.Time
	Until     time.Time
	Handled   bool // also letters already replayed or discarded
}

// Narrowed reports whether anything besides Handled is set: replay and discard need a
// selection or --all.
func (s Selection) Narrowed() bool {
	return len(s.IDs) > 0 || len(s.OutboxIDs) > 0 || s.Topic != "" || s.Reason != "" || !s.Since.IsZero() || !s.Until.IsZero()
}

// Match reports whether l is selected (its state aside).
func (s Selection) Match(l *Letter) bool {
	if len(s.IDs) > 0 && !contains(s.IDs, l.ID) {
		return false
	}
	if len(s.OutboxIDs) > 0 && !contains(s.OutboxIDs, l.OutboxID) {
		return false
	}
	if s.Topic != "" && l.Topic != s.Topic {
		return false
	}
	if s.Reason != "" && !strings.Contains(strings.ToLower(l.Error), strings.ToLower(s.Reason)) &&
		!strings.Contains(strings.ToLower(l.Reason()), strings.ToLower(s.Reason)) {
		return false
	}
	if !s.Since.IsZero() && l.Seen.Before(s.Since) {
		return false
	}
	if !s.Until.IsZero() && !l.Seen.Before(s.Until) {
		return false
	}
	return true
}

// Filter returns the selected letters; those already handled only with Handled.
func (s Selection) Filter(ls []*Letter) []*Letter {
	var out []*Letter
	for _, l := range ls {
		if s.Match(l) && (s.Handled || l.State == Pending) {
			out = append(out, l)
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// ParseTime parses a --since/--until value: RFC 3339 (2026-05-01T10:00:00Z), a date
// (2026-05-01, UTC midnight), "YYYY-MM-DD HH:MM[:SS]" (UTC), or a duration meaning that long
// before now (90m, 2h, 3d). "" is the zero time.
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(d, "%d", &n); err == nil && fmt.Sprint(n) == d && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration back from now must not be negative", s)
		}
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q: use RFC 3339 (2026-05-01T10:00:00Z), a date (2026-05-01) or a duration back from now (2h, 3d)", s)
}

// ParseID checks a letter id for the source: "partition:offset" for the topic, a row id for
// the table.
func ParseID(fromTopic bool, id string) error {
	var a, b int64
	if fromTopic {
		if n, err := fmt.Sscanf(id, "%d:%d", &a, &b); err != nil || n != 2 || fmt.Sprintf("%d:%d", a, b) != id || a < 0 || b < 0 {
			return fmt.Errorf("letter id %q: on the topic a letter is PARTITION:OFFSET, e.g. 0:17 (see list)", id)
		}
		return nil
	}
	if n, err := fmt.Sscanf(id, "%d", &a); err != nil || n != 1 || fmt.Sprint(a) != id || a < 1 {
		return fmt.Errorf("letter id %q: in the table a letter is its row id, e.g. 42 (see list)", id)
	}
	return nil
}
