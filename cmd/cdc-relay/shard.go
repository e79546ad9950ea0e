package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// shardFlag is run's and poll's --shard I/N: the relay (or poller) of one shard of an outbox
// split by a hash of its key column (docs/shards.md). run streams the shard's slot and
// publications (slotstore.Shard.Slot, Publication), so that its transactional id, its hold on
// the slot, its checkpoint and its metrics are the shard's; poll selects the shard's rows.
type shardFlag struct {
	text  string
	shard *slotstore.Shard // nil: not sharded
	// baseSlot and basePubs are --slot and --publication as given, before run replaced
	// them with the shard's names.
	baseSlot string
	basePubs []string
}

const shardUsage = "this process's shard I of N (0 <= I < N <= 64), e.g. 1/4: "

func (s *shardFlag) register(fs *flag.FlagSet, what string) {
	fs.StringVar(&s.text, "shard", "", shardUsage+what)
}

// parse reads --shard; the error is a usage error naming the flag.
func (s *shardFlag) parse() error {
	if s.text == "" {
		return nil
	}
	sh, err := slotstore.ParseShard(s.text)
	if err != nil {
		return &usageError{fmt.Errorf("--shard: %w", err)}
	}
	s.shard = &sh
	return nil
}

// applyRun parses --shard and, when given, replaces the slot and every publication with the
// shard's, checking the names they make.
func (s *shardFlag) applyRun(c *common, pubs *listFlag) error {
	if err := s.parse(); err != nil || s.shard == nil {
		return err
	}
	s.baseSlot, s.basePubs = c.slot, append([]string(nil), (*pubs)...)
	c.slot = s.shard.Slot(c.slot)
	if err := slotstore.ValidateName("slot", c.slot); err != nil {
		return usageErr("--shard %s: %w: the shard's slot is --slot with the suffix %q, so --slot may have at most %d characters",
			s.shard, err, strings.TrimPrefix(c.slot, s.baseSlot), 63-len(c.slot)+len(s.baseSlot))
	}
	for i, p := range *pubs {
		(*pubs)[i] = s.shard.Publication(p)
		if err := slotstore.ValidateName("publication", (*pubs)[i]); err != nil {
			return usageErr("--shard %s: %w: the shard's publication is --publication with the suffix %q", s.shard, err, strings.TrimPrefix((*pubs)[i], p))
		}
	}
	return nil
}

// checkPublications refuses, before run streams, a shard publication without the shard's
// row filter: its slot would carry other shards' rows, which their relays publish too. It
// warns that logical messages are not sharded: PostgreSQL sends each to every slot, so every
// shard's relay publishes each one.
func (s *shardFlag) checkPublications(ctx context.Context, conn *pgx.Conn, pubs []string, keyColumn, messagePrefix string, log *slog.Logger) error {
	if s.shard == nil {
		return nil
	}
	for _, p := range pubs {
		if err := slotstore.New(conn).CheckShardPublication(ctx, p, *s.shard, keyColumn); err != nil {
			return shardErr(err)
		}
	}
	log.Warn("sharded: outbox rows are split by the publications' row filters, but logical messages (pg_logical_emit_message) are not: "+
		"PostgreSQL sends each to every shard's slot, and every shard's relay publishes it; write outbox rows, not messages, to a sharded outbox",
		"shard", s.shard.String(), "message_prefix", cmp.Or(messagePrefix, "outbox"))
	return nil
}

// shardErr is slotErr with the shards' findings, which are usage errors (exit 2) too: a
// server without row filters, a publication that is not the shard's, a table without the key
// column.
func shardErr(err error) error {
	if errors.Is(err, slotstore.ErrRowFilterUnsupported) || errors.Is(err, slotstore.ErrShardFilter) {
		return &usageError{err}
	}
	return slotErr(err)
}

// shardsFlags are slot create's and slot drop's --shards N, and the key column the shards
// hash (slot create: --column-aggregate-id, or the --profile's).
type shardsFlags struct {
	count   int
	key     string
	profile string
}

func (s *shardsFlags) register(fs *flag.FlagSet, create bool) {
	if !create {
		fs.IntVar(&s.count, "shards", 0, "drop the N shards' slots and, with --publication, their publications (<slot>_s<I>of<N>, <publication>_s<I>of<N>) instead of --slot's")
		return
	}
	fs.IntVar(&s.count, "shards", 0, "split the outbox over N shards (1 to 64, PostgreSQL 15+): N insert-only publications, each with a row filter on a hash of the key column, "+
		"and N slots, <slot>_s<I>of<N> and <publication>_s<I>of<N>; run each with run --shard I/N (docs/shards.md)")
	fs.StringVar(&s.key, "column-aggregate-id", "aggregate_id", "with --shards: the key column the shards hash, the one run reads as the Kafka key")
	fs.StringVar(&s.profile, "profile", "", "with --shards: the outbox publisher whose key column the shards hash, as run's --profile (debezium: aggregateid); --column-aggregate-id overrides it")
}

// parse checks --shards and picks the key column; 0 shards means not sharded.
func (s *shardsFlags) parse(fs *flag.FlagSet) error {
	if s.count == 0 {
		for _, name := range []string{"column-aggregate-id", "profile"} {
			if isSet(fs, name) {
				return usageErr("--%s goes with --shards: it names the column the shards hash", name)
			}
		}
		return nil
	}
	if s.count < 1 || s.count > slotstore.MaxShards {
		return usageErr("--shards %d: use 1 to %d", s.count, slotstore.MaxShards)
	}
	if fs.Lookup("column-aggregate-id") == nil {
		return nil // slot drop: the names alone
	}
	if s.profile != "" {
		prof, ok := outbox.Profiles[s.profile]
		if !ok {
			return usageErr("--profile %q: unknown profile", s.profile)
		}
		if !isSet(fs, "column-aggregate-id") {
			s.key = cmp.Or(prof.Columns.AggregateID, s.key)
		}
	}
	if strings.TrimSpace(s.key) == "" {
		return usageErr("--column-aggregate-id is empty: name the key column the shards hash")
	}
	return nil
}

// createShards is slot create --shards: each shard's publication and slot, shard by shard,
// each step idempotent as slot create is, so that running it again finishes what a failure
// left.
func createShards(ctx context.Context, conn *pgx.Conn, base slotstore.CreateOptions, s shardsFlags, stdout io.Writer) error {
	for _, sh := range slotstore.AllShards(s.count) {
		o := base
		o.Slot, o.Publication, o.Shard, o.KeyColumn = sh.Slot(base.Slot), sh.Publication(base.Publication), &sh, s.key
		if err := o.Validate(); err != nil {
			return usageErr("--shards %d: %w: the shards' names are --slot and --publication with the suffix _s<I>of<N>", s.count, err)
		}
		res, err := slotstore.New(conn).Create(ctx, o)
		if err != nil {
			return shardErr(err)
		}
		pubDone := "already exists"
		if res.PublicationCreated {
			pubDone = "created"
		}
		slotDone := "already exists"
		if res.SlotCreated {
			slotDone = "created at " + res.ConsistentPoint.String()
		}
		fmt.Fprintf(stdout, "shard %s: publication %s %s (insert only, rows where %s), slot %s %s\n",
			sh, o.Publication, pubDone, sh.RowFilter(s.key), o.Slot, slotDone)
	}
	return nil
}

// dropShards is slot drop --shards: each shard's slot and, when pub is given, publication. A
// shard whose slot is gone already is noted, and its publication still dropped.
func dropShards(ctx context.Context, conn *pgx.Conn, slot, pub string, n int, stdout io.Writer) error {
	store := slotstore.New(conn)
	for _, sh := range slotstore.AllShards(n) {
		sp := ""
		if pub != "" {
			sp = sh.Publication(pub)
		}
		err := store.Drop(ctx, sh.Slot(slot), sp)
		switch {
		case errors.Is(err, slotstore.ErrSlotMissing):
			fmt.Fprintf(stdout, "slot %s does not exist\n", sh.Slot(slot))
			if sp == "" {
				continue
			}
			if err := store.DropPublication(ctx, sp); err != nil {
				return slotErr(err)
			}
			fmt.Fprintf(stdout, "dropped publication %s if it existed\n", sp)
			continue
		case err != nil:
			return slotErr(err)
		default:
			fmt.Fprintf(stdout, "dropped slot %s\n", sh.Slot(slot))
		}
		if sp != "" {
			fmt.Fprintf(stdout, "dropped publication %s\n", sp)
		}
	}
	return nil
}

// shardStatuses is what slot status shows for --slot: the plain slot (nil when missing) and
// every shard slot of that base, with their publications when pub is given.
func shardStatuses(ctx context.Context, conn *pgx.Conn, slot, pub string) (plain *slotstore.Status, shards []slotstore.Status, err error) {
	store := slotstore.New(conn)
	list, err := store.ShardSlots(ctx, slot)
	if err != nil {
		return nil, nil, err
	}
	st, err := store.Status(ctx, slot, pub)
	switch {
	case err == nil:
		plain = &st
	case errors.Is(err, slotstore.ErrSlotMissing) && len(list) > 0:
	default:
		return nil, nil, err
	}
	for _, sh := range list {
		sp := ""
		if pub != "" {
			sp = sh.Publication(pub)
		}
		st, err := store.Status(ctx, sh.Slot(slot), sp)
		if errors.Is(err, slotstore.ErrSlotMissing) {
			continue // dropped since the list was read
		}
		if err != nil {
			return nil, nil, err
		}
		shards = append(shards, st)
	}
	return plain, shards, nil
}

// printShardStatuses is slot status when --slot has shard slots: the plain slot's status if
// it exists, then each shard's, as text blocks under a heading or, with --json, one JSON
// document each (a stream, which jq reads as it reads one).
func printShardStatuses(w io.Writer, plain *slotstore.Status, shards []slotstore.Status, asJSON bool, warnBytes int64) error {
	all := shards
	if plain != nil {
		all = append([]slotstore.Status{*plain}, shards...)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		for _, st := range all {
			if err := enc.Encode(st); err != nil {
				return err
			}
		}
		return nil
	}
	for i, st := range all {
		if i > 0 {
			fmt.Fprintln(w)
		}
		printStatus(w, st)
		printRetainedCheck(w, st, warnBytes)
	}
	return nil
}

// explain adds to run's preflight finding of a missing slot or publication that it is a
// shard's, and the command that makes every shard's.
func (s *shardFlag) explain(err error) error {
	if s.shard == nil || !(errors.Is(err, slotstore.ErrSlotMissing) || errors.Is(err, slotstore.ErrPublicationMissing)) {
		return err
	}
	return usageErr("%w (with --shard %s this is shard %s's; make every shard's slot and publication, each with the shard's row filter, with: "+
		"cdc-relay slot create --slot %s --publication %s --shards %d)", err, s.shard, s.shard, s.baseSlot, strings.Join(s.basePubs, ","), s.shard.Count)
}
