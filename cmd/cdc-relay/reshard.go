package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

// cmdSlotReshard is slot reshard --shards M [--from N]: generation M's publications and slots
// made (as slot create --shards M makes them), every one advanced to one common LSN C, C
// recorded in their publications' comments, and the commands that finish the move printed. Run
// again, it finds C recorded and prints the same. (docs/shards.md, "Resharding")
func cmdSlotReshard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	var pub string
	var tables listFlag
	var shards shardsFlags
	var from int
	fs := newFlagSet("slot reshard", "slot reshard --pg-url URL --slot NAME --publication NAME --shards M [--from N] [--table public.outbox] [--column-aggregate-id COLUMN]", stderr)
	c.register(fs)
	fs.StringVar(&pub, "publication", "", "the publication's base name, as slot create was given it")
	fs.Var(&tables, "table", "outbox table(s) the new shards publish, schema.table, comma-separated or repeated (default public.outbox)")
	fs.IntVar(&from, "from", -1, "the generation the relays run now: N shards, or 0 for the plain slot (default: the one other generation of --slot that exists)")
	shards.register(fs, true)
	conn, err := slotConn(ctx, fs, args, &c)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := shards.parse(fs); err != nil {
		return err
	}
	if shards.count == 0 {
		return usageErr("--shards M is required: the number of shards to move to (1 to %d)", slotstore.MaxShards)
	}
	if from == shards.count || from < -1 || from > slotstore.MaxShards {
		return usageErr("--from %d: the generation the relays run now, 0 (the plain slot) or 1 to %d shards, other than --shards %d", from, slotstore.MaxShards, shards.count)
	}
	if pub == "" {
		return usageErr("--publication is required (or set CDC_RELAY_PUBLICATION)")
	}
	store := slotstore.New(conn)
	gen := slotstore.Generation{Count: shards.count}
	first := slotstore.Shard{Index: 0, Count: shards.count}.Publication(pub)

	slots, err := store.GenerationSlots(ctx, c.slot)
	if err != nil {
		return err
	}
	old, err := slotstore.ReshardFrom(slices.Collect(maps.Keys(slots)), c.slot, shards.count, from)
	if err != nil {
		return &usageError{err}
	}
	if at, ok, err := store.RecordedStart(ctx, first); err != nil {
		return err
	} else if ok && hasAll(slots, gen.Slots(c.slot)) {
		fmt.Fprintf(stdout, "generation of %s exists already: it starts at commit LSN %s (recorded in publication %s's comment)\n", gen, at, first)
		printReshardNext(stdout, c.slot, pub, old, gen, at)
		return nil
	}

	opts := slotstore.CreateOptions{Slot: c.slot, Publication: pub, Tables: tables}
	if err := opts.Validate(); err != nil {
		return &usageError{err}
	}
	if err := createShards(ctx, conn, opts, shards, stdout); err != nil {
		return err
	}
	if slots, err = store.GenerationSlots(ctx, c.slot); err != nil {
		return err
	}
	at := slotstore.ReshardStart(positions(slots, gen.Slots(c.slot)), positions(slots, old.Slots(c.slot)))
	for _, s := range gen.Slots(c.slot) {
		if slots[s] >= at {
			continue
		}
		got, err := store.Advance(ctx, s, at)
		if err != nil {
			return slotErr(err)
		}
		if got < at {
			return fmt.Errorf("slot reshard: slot %s advanced to %s, not to %s; run slot reshard again", s, got, at)
		}
	}
	for _, sh := range slotstore.AllShards(shards.count) {
		if err := store.RecordStart(ctx, sh.Publication(pub), shards.count, at); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "generation of %s starts at commit LSN %s: every one of its slots is advanced to it\n", gen, at)
	printReshardNext(stdout, c.slot, pub, old, gen, at)
	return nil
}

func hasAll(slots map[string]pglogrepl.LSN, names []string) bool {
	for _, n := range names {
		if _, ok := slots[n]; !ok {
			return false
		}
	}
	return true
}

func positions(slots map[string]pglogrepl.LSN, names []string) []pglogrepl.LSN {
	out := make([]pglogrepl.LSN, 0, len(names))
	for _, n := range names {
		out = append(out, slots[n])
	}
	return out
}

// printReshardNext prints the commands that finish a reshard from old to gen at C.
func printReshardNext(w io.Writer, slot, pub string, old, gen slotstore.Generation, at pglogrepl.LSN) {
	base := fmt.Sprintf("--slot %s --publication %s", slot, pub)
	drain := fmt.Sprintf("cdc-relay run %s --stop-at-lsn %s", base, at)
	drop := fmt.Sprintf("cdc-relay slot drop %s", base)
	if old.Count > 0 {
		drain = fmt.Sprintf("cdc-relay run %s --shard I/%d --stop-at-lsn %s   (for each I from 0 to %d)", base, old.Count, at, old.Count-1)
		drop += fmt.Sprintf(" --shards %d", old.Count)
	}
	fmt.Fprintf(w, "next:\n"+
		"  1. replace each relay of %s (stop it, then run it with --stop-at-lsn): it publishes what committed before %s, confirms it and exits 0:\n     %s\n"+
		"  2. start the relays of %s; each waits until the older slots are gone:\n     cdc-relay run %s --shard I/%d   (for each I from 0 to %d)\n"+
		"  3. once every relay of step 1 exited 0, drop the old slots (the new relays then start publishing):\n     %s\n",
		old, at, drain, gen, base, gen.Count, gen.Count-1, drop)
}

// awaitGeneration is run's generation guard (awaitGeneration below) for a shard relay that does
// not drain with --stop-at-lsn; ok is true at once for any other.
func (f *runFlags) awaitGeneration(ctx context.Context, log *slog.Logger) (ok bool, err error) {
	if f.shard.shard == nil || f.stopAt.lsn != 0 {
		return true, nil
	}
	return awaitGeneration(ctx, &f.c, f.shard.baseSlot, *f.shard.shard, f.pubs[0], log)
}

// generationCheckEvery is how often a shard relay held by the generation guard looks again.
var generationCheckEvery = 5 * time.Second

// awaitGeneration is the generation guard: a shard relay of count shards does not publish
// while a slot of another generation of its base name exists (the plain slot, or shards of
// another count): that generation may still be publishing the transactions committed before
// this one's start, and a key's later records must not overtake them. It waits, saying which
// slots and what to do, looking again every generationCheckEvery; ok is false when ctx ended
// first. A relay draining with --stop-at-lsn is never held: it is the old generation.
func awaitGeneration(ctx context.Context, c *common, base string, sh slotstore.Shard, ownPub string, log *slog.Logger) (ok bool, err error) {
	began := time.Now()
	for attempt := 0; ; attempt++ {
		others, at, err := otherGenerations(ctx, c, base, sh.Count, ownPub)
		if err != nil {
			return false, fmt.Errorf("run: the generation guard: %w", err)
		}
		if len(others) == 0 {
			if attempt > 0 {
				log.Info("the other generation's slots are gone: starting to publish", "shard", sh, "waited", time.Since(began).Round(time.Millisecond))
			}
			return true, nil
		}
		drain := "run each of them with --stop-at-lsn C, C as slot reshard printed it"
		if at != 0 {
			drain = "run each of them with --stop-at-lsn " + at.String()
		}
		if attempt == 0 || attempt%12 == 0 {
			log.Warn("waiting: slots of another generation of this outbox exist, which may still publish rows committed before this generation's start; "+
				"this shard publishes nothing until they are gone (drain them, then drop them)",
				"shard", sh, "waiting_for", others, "drain", drain, "then", "cdc-relay slot drop --shards N (or slot drop for the plain slot)",
				"retry_in", generationCheckEvery)
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(generationCheckEvery):
		}
	}
}

// otherGenerations connects, lists the slots of other generations of base, and reads the start
// of this generation recorded in ownPub's comment (0 when none).
func otherGenerations(ctx context.Context, c *common, base string, count int, ownPub string) ([]string, pglogrepl.LSN, error) {
	conn, err := connectPG(ctx, c)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close(context.Background())
	return otherGenerationsOn(ctx, conn, base, count, ownPub)
}

func otherGenerationsOn(ctx context.Context, conn *pgx.Conn, base string, count int, ownPub string) ([]string, pglogrepl.LSN, error) {
	store := slotstore.New(conn)
	slots, err := store.GenerationSlots(ctx, base)
	if err != nil {
		return nil, 0, err
	}
	others := slotstore.OtherGenerations(slices.Collect(maps.Keys(slots)), base, count)
	if len(others) == 0 {
		return nil, 0, nil
	}
	at, _, _ := store.RecordedStart(ctx, ownPub) // the note only words the advice: a failed read leaves it out
	return others, at, nil
}
