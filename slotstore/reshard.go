package slotstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Resharding moves an outbox from one generation of slots (the plain slot, or N shards) to
// another (M shards) without a gap or an overlap: a logical slot streams exactly the
// transactions whose commit record starts at or after its confirmed position (PostgreSQL's
// SnapBuildXactNeedsSkip), so once every slot of the new generation is advanced to one LSN C,
// the old generation publishes the transactions committed before C (run --stop-at-lsn C) and the
// new one those committed at or after it. docs/shards.md has the command sequence.

// ErrNoOldGeneration means slot reshard found no other generation of the base name to move
// from: there is nothing to reshard, slot create --shards makes the first one.
var ErrNoOldGeneration = errors.New("no other generation of slots to reshard from")

// ErrGenerationAmbiguous means more than one other generation exists, and --from must say which
// one is moved from (or the leftover one dropped).
var ErrGenerationAmbiguous = errors.New("more than one other generation of slots exists")

// Generation is one generation of a base name's slots: the plain slot (Count 0) or Count shards.
type Generation struct{ Count int }

// String is "plain" or "N shards", as the messages say it.
func (g Generation) String() string {
	if g.Count == 0 {
		return "the plain slot"
	}
	return fmt.Sprintf("%d shards", g.Count)
}

// Slots is the generation's slot names of base.
func (g Generation) Slots(base string) []string {
	if g.Count == 0 {
		return []string{base}
	}
	out := make([]string, 0, g.Count)
	for _, sh := range AllShards(g.Count) {
		out = append(out, sh.Slot(base))
	}
	return out
}

// GenerationSlots lists the slots of base in this cluster that belong to a generation: the plain
// base and every base_s<I>of<N>, each with its confirmed position, by name.
func (s *Store) GenerationSlots(ctx context.Context, base string) (map[string]pglogrepl.LSN, error) {
	rows, err := s.conn.Query(ctx, `
SELECT slot_name::text, coalesce(confirmed_flush_lsn::text, '0/0') FROM pg_replication_slots
WHERE slot_name::text = $1 OR starts_with(slot_name::text, $1 || '_s')`, base)
	if err != nil {
		return nil, fmt.Errorf("list the slots of %q: read pg_replication_slots: %w", base, err)
	}
	type slotPos struct{ Name, LSN string }
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[slotPos])
	if err != nil {
		return nil, fmt.Errorf("list the slots of %q: read pg_replication_slots: %w", base, err)
	}
	out := make(map[string]pglogrepl.LSN, len(got))
	for _, g := range got {
		if _, ok := ShardOf(g.Name, base); !ok && g.Name != base {
			continue
		}
		lsn, err := pglogrepl.ParseLSN(g.LSN)
		if err != nil {
			return nil, fmt.Errorf("slot %q: confirmed_flush_lsn %q: %w", g.Name, g.LSN, err)
		}
		out[g.Name] = lsn
	}
	return out, nil
}

// OtherGenerations returns, sorted, the names among slots that are base's and not of
// generation count: the plain base, or a shard slot of another count. A shard relay of count
// does not publish while any exists (the generation guard).
func OtherGenerations(slots []string, base string, count int) []string {
	var out []string
	for _, n := range slots {
		if sh, ok := ShardOf(n, base); (ok && sh.Count != count) || n == base {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Generations returns the generations that slots (of base) hold, plain first, then by count.
func Generations(slots []string, base string) []Generation {
	var out []Generation
	for _, n := range slots {
		g := Generation{}
		if sh, ok := ShardOf(n, base); ok {
			g.Count = sh.Count
		} else if n != base {
			continue
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b Generation) int { return a.Count - b.Count })
	return out
}

// ReshardFrom picks the generation a reshard to count moves from: from when given (>= 0; 0
// the plain slot), else the one other generation of slots. Its error is ErrNoOldGeneration or
// ErrGenerationAmbiguous, or says that the given one has no slot.
func ReshardFrom(slots []string, base string, count, from int) (Generation, error) {
	gens := slices.DeleteFunc(Generations(slots, base), func(g Generation) bool { return g.Count == count })
	if from >= 0 {
		g := Generation{Count: from}
		if !slices.Contains(gens, g) {
			return g, fmt.Errorf("%w: --from %d: no slot of %s exists (%s)", ErrNoOldGeneration, from, g, strings.Join(g.Slots(base), ", "))
		}
		return g, nil
	}
	switch len(gens) {
	case 0:
		return Generation{}, fmt.Errorf("%w: slot %q has neither a plain slot nor shard slots of another count; "+
			"make the first generation with slot create --shards %d", ErrNoOldGeneration, base, count)
	case 1:
		return gens[0], nil
	}
	names := make([]string, len(gens))
	for i, g := range gens {
		names[i] = g.String()
	}
	return Generation{}, fmt.Errorf("%w for slot %q: %s; say which one the relays run now with --from N (0: the plain slot), "+
		"or drop the leftover one first", ErrGenerationAmbiguous, base, strings.Join(names, " and "))
}

// ReshardStart is the common start C of a new generation: the largest of the new slots'
// confirmed positions (their consistent points, when fresh) and the old generation's confirmed
// positions. Every new slot is advanced to it. Taking the old slots' positions in keeps C from
// lying below what an old relay already confirmed (an idle keepalive confirms the server's WAL
// end): the old generation has published everything it confirmed, so the new one starts there.
func ReshardStart(newSlots, oldSlots []pglogrepl.LSN) pglogrepl.LSN {
	var c pglogrepl.LSN
	for _, l := range append(slices.Clone(newSlots), oldSlots...) {
		c = max(c, l)
	}
	return c
}

// Advance moves a logical slot's confirmed position forward to lsn
// (pg_replication_slot_advance) and returns where it is. A slot at or past lsn is left alone.
func (s *Store) Advance(ctx context.Context, slot string, lsn pglogrepl.LSN) (pglogrepl.LSN, error) {
	var got string
	err := s.conn.QueryRow(ctx, `
SELECT coalesce(end_lsn::text, '0/0') FROM pg_replication_slot_advance($1, $2::pg_lsn)`, slot, lsn.String()).Scan(&got)
	if err != nil {
		if ss, serr := s.session(ctx); serr == nil {
			return 0, ddlError("slot", slot, "advance replication slot to "+lsn.String(), ss.Role, err)
		}
		return 0, fmt.Errorf("slot %q: advance to %s: %w", slot, lsn, err)
	}
	return pglogrepl.ParseLSN(got)
}

// reshardNote is how the start of a generation is recorded in its publications' comments, so
// that slot reshard run again says the same C after relays of the new generation moved its
// slots past it.
const reshardNote = "cdc-relay slot reshard: this generation of %d shards starts at commit LSN %s; the generation before it drains with run --stop-at-lsn %s"

var reshardNoteRE = regexp.MustCompile(`starts at commit LSN ([0-9A-F]+/[0-9A-F]+)`)

// RecordStart writes C into publication pub's comment.
func (s *Store) RecordStart(ctx context.Context, pub string, count int, c pglogrepl.LSN) error {
	text := fmt.Sprintf(reshardNote, count, c, c)
	if _, err := s.conn.Exec(ctx, "COMMENT ON PUBLICATION "+pgx.Identifier{pub}.Sanitize()+" IS "+quoteLiteral(text)); err != nil {
		return fmt.Errorf("publication %q: record the generation's start %s in its comment: %w", pub, c, err)
	}
	return nil
}

// RecordedStart reads the start RecordStart wrote into publication pub's comment; ok is false
// when the publication or the note is missing.
func (s *Store) RecordedStart(ctx context.Context, pub string) (c pglogrepl.LSN, ok bool, err error) {
	var comment *string
	err = s.conn.QueryRow(ctx, `SELECT obj_description(oid, 'pg_publication') FROM pg_publication WHERE pubname = $1`, pub).Scan(&comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("publication %q: read its comment: %w", pub, err)
	}
	if comment == nil {
		return 0, false, nil
	}
	m := reshardNoteRE.FindStringSubmatch(*comment)
	if m == nil {
		return 0, false, nil
	}
	c, err = pglogrepl.ParseLSN(m[1])
	return c, err == nil, err
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
