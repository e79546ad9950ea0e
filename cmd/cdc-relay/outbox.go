package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/prune"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

const pruneSynopsis = "outbox prune --pg-url URL --older-than 168h [--mode run|poll] [--slot NAME] [--table public.outbox] [--batch 1000] [--partitions drop|detach]"

func cmdOutbox(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) {
		fmt.Fprintf(stdout, "Usage: cdc-relay %s\n       cdc-relay %s\n\nRun 'cdc-relay outbox SUBCOMMAND --help' for its flags.\n", pruneSynopsis, markPublishedSynopsis)
		if len(args) == 0 {
			return usageErr("outbox needs a subcommand: prune or mark-published")
		}
		return nil
	}
	if args[0] == "mark-published" {
		return cmdOutboxMarkPublished(ctx, args[1:], stdout, stderr)
	}
	if args[0] != "prune" {
		return usageErr("unknown outbox subcommand %q: use prune or mark-published", args[0])
	}
	return cmdOutboxPrune(ctx, args[1:], stdout, stderr)
}

// pruneFlagNames puts the flags into prune.Options' errors.
var pruneFlagNames = strings.NewReplacer("prune: ", "", "Options.Slot", "--slot", "Options.Mode", "--mode", "Options.OlderThan", "--older-than", "Options.Partitions", "--partitions",
	"Options.Batch", "--batch", "Options.Wait", "--wait")

// cmdOutboxPrune is `cdc-relay outbox prune`: delete published rows older than --older-than.
func cmdOutboxPrune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		c    common
		o    prune.Options
		mode string
	)
	fs := newFlagSet("outbox prune", pruneSynopsis, stderr)
	c.register(fs)
	fs.StringVar(&mode, "mode", "run", "which publisher marks rows published: run (the slot's confirmed position; needs --slot) or poll (published_at)")
	fs.StringVar(&o.Table, "table", outbox.DefaultTable, "outbox table, schema.table")
	fs.DurationVar(&o.OlderThan, "older-than", 0, "only delete rows created longer ago than this, e.g. 168h (required)")
	fs.IntVar(&o.Batch, "batch", 1000, "rows per DELETE (each its own transaction)")
	fs.DurationVar(&o.Wait, "wait", 2*time.Minute, "mode run: how long to wait for the slot to confirm the current WAL position before giving up")
	fs.StringVar(&o.Columns.ID, "column-id", "id", "outbox id column (batches delete the lowest ids first)")
	fs.StringVar(&o.Columns.CreatedAt, "column-created-at", "created_at", "creation time column")
	fs.StringVar(&o.Columns.PublishedAt, "column-published-at", "published_at", "publication time column (mode poll)")
	fs.StringVar((*string)(&o.Partitions), "partitions", "", "a partitioned --table: drop (or detach) each partition whose rows are all older than --older-than and published, instead of deleting rows; "+
		"one unpublished or newer row keeps its partition whole, as do an empty partition and the default one")
	if err := parse(fs, args); err != nil {
		return err
	}
	o.Mode, o.Slot = prune.Mode(mode), c.slot
	validate := c.validate
	if o.Mode == prune.ModePoll {
		validate = c.validateNoSlot // --slot is only needed in run mode
	}
	if err := validate(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return usageErr("%s", pruneFlagNames.Replace(err.Error()))
	}
	log := c.logger(stderr)
	conn, err := connectPG(ctx, &c)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	o.Progress = func(n int64) { log.Debug("pruning", "table", o.Table, "deleted", n) }
	res, err := prune.Run(ctx, conn, o)
	if err != nil {
		if errors.Is(err, prune.ErrNotPartitioned) {
			return usageErr("%s", pruneFlagNames.Replace(err.Error()))
		}
		if errors.Is(err, slotstore.ErrSlotMissing) {
			return &usageError{err}
		}
		return fmt.Errorf("outbox prune: %w", err)
	}
	if o.Partitions != "" {
		done := map[prune.PartitionAction]string{prune.PartitionsDrop: "dropped", prune.PartitionsDetach: "detached"}[o.Partitions]
		for _, p := range res.Partitions {
			fmt.Fprintf(stdout, "%s partition %s of %s: every row created before %s and published\n", done, p, o.Table, res.Cutoff.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(stdout, "%s %d partitions of %s; kept %d whole (a row unpublished or newer, empty, or the default partition): %s\n",
			done, len(res.Partitions), o.Table, len(res.PartitionsKept), strings.Join(res.PartitionsKept, ", "))
		return nil
	}
	switch o.Mode {
	case prune.ModeRun:
		fmt.Fprintf(stdout, "pruned %d rows from %s in %d batches: created before %s and committed before WAL %s, which slot %s confirmed (%s)\n",
			res.Deleted, o.Table, res.Batches, res.Cutoff.UTC().Format(time.RFC3339), res.MarkLSN, o.Slot, res.Confirmed)
		if res.Kept > 0 {
			why := "their transactions had not finished when this run began; none is open now, so the next run deletes them"
			if res.Holder != nil {
				why = "their transactions had not finished when this run began; the oldest transaction open now is " + res.Holder.String() +
					", and a later run deletes them once it ends"
			}
			kept := strconv.FormatInt(res.Kept, 10)
			if res.Kept >= prune.KeptLimit {
				kept = "at least " + kept
			}
			fmt.Fprintf(stdout, "kept %s rows created before %s: %s\n", kept, res.Cutoff.UTC().Format(time.RFC3339), why)
		}
	case prune.ModePoll:
		fmt.Fprintf(stdout, "pruned %d rows from %s in %d batches: created before %s and published (published_at set)\n",
			res.Deleted, o.Table, res.Batches, res.Cutoff.UTC().Format(time.RFC3339))
	}
	return nil
}
