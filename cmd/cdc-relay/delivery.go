package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/sink"
)

// The --delivery values.
const (
	deliveryAtLeastOnce = "at-least-once"
	deliveryExactlyOnce = "exactly-once"
)

// deliveryFlags are run's --delivery and the flags of exactly-once mode.
type deliveryFlags struct {
	mode string
	eo   relay.ExactlyOnce
}

// eoFlags are the flags that mean something only with --delivery exactly-once.
var eoFlags = []string{"transaction-interval", "transaction-max-records", "transactional-id", "checkpoint-topic"}

func (d *deliveryFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.mode, "delivery", deliveryAtLeastOnce, "at-least-once (a crash replays, consumers dedupe) or exactly-once (a transactional producer that belongs to the slot, "+
		"with the slot's position in each Kafka transaction: a read_committed consumer sees each committed row once; see README, \"Exactly-once delivery\")")
	fs.DurationVar(&d.eo.Interval, "transaction-interval", relay.DefaultTransactionInterval, "with --delivery exactly-once: how long a Kafka transaction stays open at most while the relay has more decoded to send, "+
		"committed after the PostgreSQL transaction decoded then (one still inside a PostgreSQL transaction at twice the interval is split there); "+
		"a relay caught up between PostgreSQL transactions commits at once, so this bounds what read_committed consumers wait for under load, not on a quiet stream")
	fs.IntVar(&d.eo.MaxRecords, "transaction-max-records", relay.DefaultTransactionMaxRecords, "with --delivery exactly-once: records (dead letters included) a Kafka transaction holds at most; "+
		"a larger PostgreSQL transaction is split, and the checkpoint counts what of it was committed")
	fs.StringVar(&d.eo.TransactionalID, "transactional-id", "", "with --delivery exactly-once: the producer's transactional.id (default cdc-relay-<slot>); "+
		"the same for every relay of the slot, and its own for each PostgreSQL cluster whose slots of one name publish to one Kafka cluster")
	fs.StringVar(&d.eo.CheckpointTopic, "checkpoint-topic", kafkatxn.DefaultCheckpointTopic, "with --delivery exactly-once: the compacted topic of the slots' checkpoints, created if missing")
}

// config checks the group and returns the relay's exactly-once configuration, nil for
// at-least-once. Errors are usage errors (exit 2) that name the flag; taken names the topics
// the records and dead letters go to, which the checkpoint topic must not be.
func (d *deliveryFlags) config(fs *flag.FlagSet, taken ...string) (*relay.ExactlyOnce, error) {
	if eo, err := deliveryMode(fs, d.mode, eoFlags); !eo || err != nil {
		return nil, err
	}
	var errs []error
	if d.eo.Interval <= 0 {
		errs = append(errs, fmt.Errorf("--transaction-interval %s: must be positive (default %s)", d.eo.Interval, relay.DefaultTransactionInterval))
	} else if limit := kafkatxn.DefaultTransactionTimeout / 2; d.eo.Interval >= limit {
		errs = append(errs, fmt.Errorf("--transaction-interval %s: must be below %s, half the Kafka transaction timeout (%s): "+
			"a Kafka transaction inside a PostgreSQL transaction is split at twice the interval, and Kafka aborts one open longer than the timeout",
			d.eo.Interval, limit, kafkatxn.DefaultTransactionTimeout))
	}
	if d.eo.MaxRecords <= 0 {
		errs = append(errs, fmt.Errorf("--transaction-max-records %d: must be positive (default %d)", d.eo.MaxRecords, relay.DefaultTransactionMaxRecords))
	}
	errs = append(errs, checkpointFlagErrs(fs, d.eo.CheckpointTopic, d.eo.TransactionalID, "cdc-relay-<slot>", taken)...)
	if err := errors.Join(errs...); err != nil {
		return nil, &usageError{err}
	}
	eo := d.eo
	return &eo, nil
}

// deliveryMode checks --delivery (run's and poll's) and that none of the flags only exactly-once
// mode reads is set without it; it reports whether the mode is exactly-once.
func deliveryMode(fs *flag.FlagSet, mode string, only []string) (exactlyOnce bool, err error) {
	switch mode {
	case deliveryAtLeastOnce:
		for _, f := range only {
			if isSet(fs, f) {
				return false, usageErr("--%s applies only with --delivery exactly-once (the delivery is %s)", f, mode)
			}
		}
		return false, nil
	case deliveryExactlyOnce:
		return true, nil
	default:
		return false, usageErr("--delivery %q: use %s (the default) or %s", mode, deliveryAtLeastOnce, deliveryExactlyOnce)
	}
}

// checkpointFlagErrs are the checks of --checkpoint-topic and --transactional-id that run and
// poll share: a valid topic name that no record or dead letter goes to (taken), and an id that
// is not given empty (idDefault names what leaving it out gives).
func checkpointFlagErrs(fs *flag.FlagSet, topic, id, idDefault string, taken []string) []error {
	var errs []error
	if isSet(fs, "transactional-id") && id == "" {
		errs = append(errs, fmt.Errorf("--transactional-id is empty: leave it out for %s", idDefault))
	} else if err := checkTransactionalID(id); err != nil {
		errs = append(errs, err)
	}
	if err := sink.ValidTopicName(topic); err != nil {
		errs = append(errs, fmt.Errorf("--checkpoint-topic: %w", err))
	}
	for _, t := range taken {
		if t != "" && t == topic {
			errs = append(errs, fmt.Errorf("--checkpoint-topic %s is also a topic records go to: give the checkpoints a compacted topic of their own", t))
		}
	}
	return errs
}

// checkpointTopicErr turns a checkpoint topic that deletes by retention into a usage error
// (exit 2) that names the flag.
func checkpointTopicErr(err error) error {
	var nc *kafkatxn.NotCompactedError
	if errors.As(err, &nc) {
		return &usageError{fmt.Errorf("--checkpoint-topic: %w", nc)}
	}
	return err
}
