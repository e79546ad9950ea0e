package slotstore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// MaxShards is the largest shard count: each shard is a walsender, a slot and a relay.
const MaxShards = 64

// Shard is shard Index of Count: the outbox rows whose key hashes to Index.
//
// Every key is in exactly one shard for every Count, because the server computes the
// same expression (RowFilter) for each shard's publication, and the poller computes it in
// SQL on the same server: there is no Go copy of the hash to drift from PostgreSQL's.
type Shard struct{ Index, Count int }

// ParseShard reads "I/N" (0 <= I < N, 1 <= N <= 64). Its error says what is wrong and
// what to write instead.
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want I/N, this relay's shard I of N shards counting from 0, e.g. 0/4 .. 3/4", s)
	}
	i, ierr := strconv.Atoi(is)
	n, nerr := strconv.Atoi(ns)
	switch {
	case ierr != nil || nerr != nil:
		return Shard{}, fmt.Errorf("shard %q: I and N must be whole numbers, I/N with 0 <= I < N, e.g. 1/4", s)
	case n < 1 || n > MaxShards:
		return Shard{}, fmt.Errorf("shard %q: N is the number of shards, 1 to %d; write I/N with 0 <= I < N, e.g. 0/%d", s, MaxShards, max(1, min(n, MaxShards)))
	case i < 0 || i >= n:
		return Shard{}, fmt.Errorf("shard %q: I counts from 0 and must be below N; with %d shards write 0/%d .. %d/%d", s, n, n, n-1, n)
	}
	return Shard{Index: i, Count: n}, nil
}

// suffix is what a shard appends to a slot or publication name.
func (s Shard) suffix() string { return fmt.Sprintf("_s%dof%d", s.Index, s.Count) }

// Slot is shard s's replication slot: base + "_s<I>of<N>".
func (s Shard) Slot(base string) string { return base + s.suffix() }

// Publication is shard s's publication: base + "_s<I>of<N>".
func (s Shard) Publication(base string) string { return base + s.suffix() }

// RowFilter is the SQL expression (without WHERE) true for the rows of shard s:
// ((hashtext(key::text) & 2147483647) % N) = I, the key column quoted as an identifier.
// The same text is a publication's row filter and the poller's condition.
func (s Shard) RowFilter(keyColumn string) string {
	return fmt.Sprintf("((hashtext(%s::text) & 2147483647) %% %d) = %d", pgx.Identifier{keyColumn}.Sanitize(), s.Count, s.Index)
}

// String is "I/N", what ParseShard reads.
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// AllShards is 0/n .. n-1/n.
func AllShards(n int) []Shard {
	out := make([]Shard, 0, max(n, 0))
	for i := range n {
		out = append(out, Shard{Index: i, Count: n})
	}
	return out
}

// ShardOf reads a slot or publication name made by Shard.Slot or Shard.Publication from
// base back into its shard. ok is false for any other name, including the plain base.
func ShardOf(name, base string) (Shard, bool) {
	rest, ok := strings.CutPrefix(name, base+"_s")
	if !ok {
		return Shard{}, false
	}
	is, ns, ok := strings.Cut(rest, "of")
	if !ok || !canonicalNumber(is) || !canonicalNumber(ns) {
		return Shard{}, false
	}
	i, _ := strconv.Atoi(is)
	n, _ := strconv.Atoi(ns)
	if n < 1 || n > MaxShards || i >= n {
		return Shard{}, false
	}
	return Shard{Index: i, Count: n}, true
}

// canonicalNumber: decimal digits as Shard writes them (no sign, no leading zero), so that
// exactly one name maps to each shard.
func canonicalNumber(s string) bool {
	if s == "" || len(s) > 2 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
