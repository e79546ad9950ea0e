package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/sink"
)

const deadLettersUsage = "dead-letters list|show|replay|discard needs a subcommand: list, show ID, replay or discard"

// dlFlags is the flag group of `cdc-relay dead-letters ...`.
type dlFlags struct {
	c            common
	ksec         kafkaSecurity
	brokers      listFlag
	from         string
	dlqTopic     string
	deadTable    string
	marksTable   string
	slot         string
	ids          listFlag
	outboxIDs    listFlag
	topic        string
	reason       string
	since        string
	until        string
	all          bool
	dryRun       bool
	unclassified bool
	readTimeout  time.Duration
	compression  compressionFlag // replay: the codec of the batches it sends

	sel deadletters.Selection
}

func (f *dlFlags) register(fs *flag.FlagSet, sub string) {
	f.c.registerNoSlot(fs)
	fs.Var(&f.brokers, "brokers", "Kafka seed brokers, host:port, comma-separated (for --from topic, and to replay)")
	f.ksec.register(fs)
	fs.StringVar(&f.from, "from", "topic", "where the letters are: topic (--dlq-topic) or table (--dead-letter-table)")
	fs.StringVar(&f.dlqTopic, "dlq-topic", "cdc-relay.dlq", "the dead-letter topic (run's --dlq-topic)")
	fs.StringVar(&f.deadTable, "dead-letter-table", deadletters.DefaultTable, "the PostgreSQL dead-letter table (run's --dead-letter-table)")
	fs.StringVar(&f.marksTable, "marks-table", deadletters.DefaultMarksTable, "PostgreSQL table keeping which letters of the topic were replayed or discarded (created if missing)")
	fs.StringVar(&f.slot, "slot", "", "--from table: only this slot's letters")
	if sub == "show" {
		return
	}
	fs.Var(&f.ids, "id", "letter id(s), comma-separated: PARTITION:OFFSET on the topic, the row id in the table (see list)")
	fs.Var(&f.outboxIDs, "outbox-id", "outbox id(s), comma-separated")
	fs.StringVar(&f.topic, "topic", "", "only letters for this original topic")
	fs.StringVar(&f.reason, "reason", "", "only letters whose error contains this (case-insensitive), e.g. MESSAGE_TOO_LARGE")
	fs.StringVar(&f.since, "since", "", "only letters parked at or after this: RFC 3339, a date, or a duration back from now (2h, 3d)")
	fs.StringVar(&f.until, "until", "", "only letters parked before this (same forms as --since)")
	switch sub {
	case "list":
		fs.BoolVar(&f.all, "all", false, "also letters already replayed or discarded")
	case "replay", "discard":
		fs.BoolVar(&f.all, "all", false, "every waiting letter (else a selection is required)")
		fs.BoolVar(&f.dryRun, "dry-run", false, "only say what would be done")
		if sub == "replay" {
			f.compression.register(fs)
			fs.BoolVar(&f.unclassified, "replay-unclassified", false, "also replay letters an older relay parked without a class (reason \"unclassified\"): any of them may be a bad row; check them with show first")
		}
	}
	fs.DurationVar(&f.readTimeout, "read-timeout", 60*time.Second, "how long reading the dead-letter topic to its end may take")
}

func (f *dlFlags) validate(sub string) error {
	var errs []error
	if err := f.c.validateNoSlot(); err != nil {
		errs = append(errs, err)
	}
	switch f.from {
	case "topic":
		if f.dlqTopic == "" {
			errs = append(errs, errors.New("--dlq-topic is empty"))
		}
		if _, err := outbox.ParseTable(f.marksTable); err != nil {
			errs = append(errs, fmt.Errorf("--marks-table: %w", err))
		}
	case "table":
		if _, err := outbox.ParseTable(f.deadTable); err != nil {
			errs = append(errs, fmt.Errorf("--dead-letter-table: %w", err))
		}
	default:
		errs = append(errs, fmt.Errorf("--from %q: use topic or table", f.from))
	}
	if (f.from == "topic" || sub == "replay") && len(f.brokers) == 0 {
		errs = append(errs, errors.New("--brokers is required (or set CDC_RELAY_BROKERS)"))
	} else if err := checkBrokers(f.brokers); err != nil {
		errs = append(errs, err)
	}
	if sub == "replay" {
		if _, err := f.compression.opts(); err != nil {
			errs = append(errs, err)
		}
	}
	sel, err := f.selection(sub, time.Now())
	if err != nil {
		errs = append(errs, err)
	}
	f.sel = sel
	if err := errors.Join(errs...); err != nil {
		var ue *usageError
		if len(errs) == 1 && errors.As(errs[0], &ue) {
			return ue
		}
		return &usageError{err}
	}
	return nil
}

// selection turns the filter flags into a Selection.
func (f *dlFlags) selection(sub string, now time.Time) (deadletters.Selection, error) {
	var errs []error
	s := deadletters.Selection{IDs: f.ids, OutboxIDs: f.outboxIDs, Topic: f.topic, Reason: f.reason}
	for _, id := range f.ids {
		if err := deadletters.ParseID(f.from == "topic", id); err != nil {
			errs = append(errs, fmt.Errorf("--id: %w", err))
		}
	}
	var err error
	if s.Since, err = deadletters.ParseTime(f.since, now); err != nil {
		errs = append(errs, fmt.Errorf("--since %w", err))
	}
	if s.Until, err = deadletters.ParseTime(f.until, now); err != nil {
		errs = append(errs, fmt.Errorf("--until %w", err))
	}
	if !s.Since.IsZero() && !s.Until.IsZero() && !s.Since.Before(s.Until) {
		errs = append(errs, fmt.Errorf("--since %s is not before --until %s", s.Since.Format(time.RFC3339), s.Until.Format(time.RFC3339)))
	}
	switch sub {
	case "list":
		s.Handled = f.all
	case "replay", "discard":
		if !f.all && !s.Narrowed() {
			errs = append(errs, errors.New("select letters with --id, --outbox-id, --topic, --reason, --since/--until, or give --all"))
		}
		s.Handled = true // handled ones are shown as skipped
	case "show":
		s.Handled = true
	}
	return s, errors.Join(errs...)
}

func cmdDeadLetters(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageErr(deadLettersUsage)
	}
	sub := args[0]
	args = args[1:]
	var synopsis string
	switch sub {
	case "list":
		synopsis = "dead-letters list --pg-url URL [--from topic|table] [--brokers HOST:PORT] [--dlq-topic T] [--topic T] [--reason S] [--since T] [--until T] [--id ID] [--all]"
	case "show":
		synopsis = "dead-letters show ID --pg-url URL [--from topic|table] [--brokers HOST:PORT]"
	case "replay":
		synopsis = "dead-letters replay --pg-url URL --brokers HOST:PORT [--from topic|table] (--id ID | --topic T | --reason S | --since T | --all) [--dry-run]"
	case "discard":
		synopsis = "dead-letters discard --pg-url URL [--from topic|table] (--id ID | --topic T | --reason S | --since T | --all) [--dry-run]"
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return usageErr("unknown dead-letters subcommand %q: use list, show, replay or discard", sub)
	}
	var f dlFlags
	fs := newFlagSet("dead-letters "+sub, synopsis, stderr)
	f.register(fs, sub)
	var showID string
	if sub == "show" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		showID, args = args[0], args[1:]
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if sub == "show" {
		if showID == "" {
			return usageErr("dead-letters show needs a letter id: dead-letters show ID (see list)")
		}
		f.ids = listFlag{showID}
	}
	if err := f.validate(sub); err != nil {
		return err
	}
	log := f.c.logger(stderr)
	kopts, err := f.ksec.opts()
	if err != nil {
		return err
	}
	kopts = append([]kgo.Opt{kgo.SeedBrokers(f.brokers...)}, append(kopts, kafkaLogger(log))...)
	warnInsecure(log, fs, &f.c, f.brokers, &f.ksec)

	conn, err := connectPG(ctx, &f.c)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var store deadletters.Store
	if f.from == "topic" {
		marks, _ := outbox.ParseTable(f.marksTable)
		ts := &deadletters.TopicStore{Topic: f.dlqTopic, Opts: kopts, Conn: conn, Marks: marks, Timeout: f.readTimeout}
		if err := ts.Prepare(ctx); err != nil {
			return slotErr(err)
		}
		store = ts
	} else {
		tbl, _ := outbox.ParseTable(f.deadTable)
		ts := &deadletters.TableStore{Conn: conn, Table: tbl, Slot: f.slot}
		exists, err := ts.Prepare(ctx)
		if err != nil {
			return slotErr(err)
		}
		if !exists {
			fmt.Fprintf(stdout, "no dead-letter table %s: nothing was parked there\n", tbl)
			return nil
		}
		store = ts
	}
	all, err := store.Load(ctx)
	if err != nil {
		return err
	}
	letters := f.sel.Filter(all)

	switch sub {
	case "list":
		printList(stdout, store, letters, f.all)
		return nil
	case "show":
		if len(letters) == 0 {
			return fmt.Errorf("no letter %s in the %s", showID, store.Name())
		}
		printLetter(stdout, letters[0])
		return nil
	case "discard":
		t, err := deadletters.Discard(ctx, store, stdout, letters, f.dryRun)
		if f.dryRun {
			fmt.Fprintf(stdout, "dry run: would discard %d, skipped %d\n", len(letters)-t.Skipped, t.Skipped)
		} else {
			fmt.Fprintf(stdout, "discarded %d, skipped %d\n", t.Discarded, t.Skipped)
		}
		return err
	}

	// replay
	scfg := sink.Config{Brokers: f.brokers, ClientID: "cdc-relay-dead-letters", Logger: log, BatchMaxBytes: 64 << 20} // the topic's max.message.bytes caps it (sink.limits)
	var biggest int
	for _, l := range letters {
		biggest = max(biggest, len(l.Key)+len(l.Value))
	}
	scfg.MaxBufferedBytes = max(32<<20, 2*biggest+1<<20)
	scfg.UnknownTopicRetries = 2
	copts, err := f.compression.opts()
	if err != nil {
		return err
	}
	scfg.Opts = slices.Concat(kopts[1:], copts) // the security options and the log, without the seed brokers (scfg.Brokers)
	s, err := sink.New(scfg)
	if err != nil {
		return &usageError{err}
	}
	defer s.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = s.Ping(pctx)
	cancel()
	if err != nil {
		return err
	}
	rp := &deadletters.Replayer{Sink: s, Store: store, Out: stdout, DryRun: f.dryRun, ReplayUnclassified: f.unclassified, Known: all}
	t, err := rp.Replay(ctx, letters)
	if f.dryRun {
		fmt.Fprintf(stdout, "dry run: nothing sent; would replay %d, refused %d, skipped %d\n", len(letters)-t.Refused-t.Skipped, t.Refused, t.Skipped)
		return err
	}
	fmt.Fprintln(stdout, t.String())
	if err != nil {
		return err
	}
	if t.Refused > 0 || t.Failed > 0 {
		return fmt.Errorf("%d letter(s) refused and %d failed: fix the cause said above and run replay again (replayed letters are not sent twice)", t.Refused, t.Failed)
	}
	return nil
}

const timeFmt = "2006-01-02T15:04:05Z"

func printList(w io.Writer, store deadletters.Store, letters []*deadletters.Letter, all bool) {
	groups := deadletters.GroupLetters(letters)
	if len(groups) == 0 {
		fmt.Fprintf(w, "no dead letters waiting in the %s\n", store.Name())
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REASON\tSOURCE\tOUTBOX-ID\tTOPIC\tFIRST-SEEN\tLAST-SEEN\tCOUNT\tSTATE\tLETTERS")
	for _, g := range groups {
		ids := make([]string, len(g.Letters))
		for i, l := range g.Letters {
			ids[i] = l.ID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", g.Reason, dash(g.Source), dash(g.OutboxID), dash(g.Topic),
			g.First.UTC().Format(timeFmt), g.Last.UTC().Format(timeFmt), len(g.Letters), g.State, strings.Join(ids, ","))
	}
	tw.Flush()
	what := "waiting"
	if all {
		what = "in all"
	}
	fmt.Fprintf(w, "%d letter(s) in %d group(s) %s, %s\n", len(letters), len(groups), what, store.Name())
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printLetter(w io.Writer, l *deadletters.Letter) {
	fmt.Fprintf(w, "letter:         %s\n", l.ID)
	fmt.Fprintf(w, "state:          %s", l.State)
	if l.State != deadletters.Pending {
		fmt.Fprintf(w, " at %s", l.HandledAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "reason:         %s\n", l.Reason())
	fmt.Fprintf(w, "error:          %s\n", l.Error)
	fmt.Fprintf(w, "source:         %s\n", dash(l.Source))
	fmt.Fprintf(w, "outbox id:      %s\n", dash(l.OutboxID))
	fmt.Fprintf(w, "original topic: %s\n", dash(l.Topic))
	fmt.Fprintf(w, "lsn:            %s\n", dash(l.LSN))
	fmt.Fprintf(w, "parked at:      %s\n", l.Seen.UTC().Format(time.RFC3339Nano))
	if l.Slot != "" {
		fmt.Fprintf(w, "slot:           %s\n", l.Slot)
	}
	fmt.Fprintf(w, "key:            %q\n", l.Key)
	fmt.Fprintf(w, "value size:     %d bytes\n", len(l.Value))
	fmt.Fprintln(w, "headers:")
	for _, h := range l.Headers {
		fmt.Fprintf(w, "  %s: %q\n", h.Key, h.Value)
	}
}
