package oracle

import "sync/atomic"

// Seen is the reading side alone: the ids read and how many records repeated one, for a
// consumer whose ledger is the outbox table itself (the benchmark: its load is open-loop and
// records nothing, so that writing costs what it costs a service). Not safe for concurrent
// use, except Dups.
type Seen struct {
	ids  map[int64]struct{}
	dups atomic.Int64
}

// NewSeen returns an empty set.
func NewSeen() *Seen { return &Seen{ids: map[int64]struct{}{}} }

// Add records that id was read and reports whether it was its first delivery.
func (s *Seen) Add(id int64) bool {
	if _, dup := s.ids[id]; dup {
		s.dups.Add(1)
		return false
	}
	s.ids[id] = struct{}{}
	return true
}

// Has reports whether id was read.
func (s *Seen) Has(id int64) bool {
	_, ok := s.ids[id]
	return ok
}

// Missing returns how many of ids were never read: committed rows lost, if ids are what the
// table committed and the consumer has caught up.
func (s *Seen) Missing(ids []int64) int {
	n := 0
	for _, id := range ids {
		if _, ok := s.ids[id]; !ok {
			n++
		}
	}
	return n
}

// Lowest returns the smallest id read, or -1.
func (s *Seen) Lowest() int64 {
	low := int64(-1)
	for id := range s.ids {
		if low < 0 || id < low {
			low = id
		}
	}
	return low
}

// Dups returns the records read beyond the first of their id. Safe to call at any time.
func (s *Seen) Dups() int64 { return s.dups.Load() }
