package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/relay"
)

// --delivery and the exactly-once flags: bad values and bad combinations are usage errors
// (exit 2) that name the flag; at-least-once stays the default and takes no exactly-once flag.
func TestDeliveryFlags(t *testing.T) {
	cases := []struct {
		args []string
		want []string // in the error; none: accepted
	}{
		{nil, nil},
		{[]string{"--delivery", "exactly-once"}, nil},
		{[]string{"--delivery", "exactly-once", "--transaction-interval", "1s", "--transaction-max-records", "5", "--transactional-id", "x", "--checkpoint-topic", "cp"}, nil},
		{[]string{"--delivery", "exactly_once"}, []string{`--delivery "exactly_once"`, "at-least-once", "exactly-once"}},
		{[]string{"--transaction-interval", "1s"}, []string{"--transaction-interval applies only with --delivery exactly-once"}},
		{[]string{"--checkpoint-topic", "cp"}, []string{"--checkpoint-topic applies only with --delivery exactly-once"}},
		{[]string{"--delivery", "exactly-once", "--transaction-interval", "0s"}, []string{"--transaction-interval 0s: must be positive"}},
		{[]string{"--delivery", "exactly-once", "--transaction-interval", "-1s"}, []string{"--transaction-interval -1s: must be positive"}},
		{[]string{"--delivery", "exactly-once", "--transaction-interval", "15s"}, []string{"--transaction-interval 15s: must be below 15s", "transaction timeout (30s)"}},
		{[]string{"--delivery", "exactly-once", "--transaction-max-records", "0"}, []string{"--transaction-max-records 0: must be positive"}},
		{[]string{"--delivery", "exactly-once", "--transactional-id", ""}, []string{"--transactional-id is empty"}},
		{[]string{"--delivery", "exactly-once", "--checkpoint-topic", "bad topic"}, []string{"--checkpoint-topic"}},
		{[]string{"--delivery", "exactly-once", "--checkpoint-topic", "dlq"}, []string{"--checkpoint-topic dlq is also a topic records go to"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var d deliveryFlags
			d.register(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			eo, err := d.config(fs, "dlq", "")
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if (eo != nil) != (d.mode == deliveryExactlyOnce) {
					t.Fatalf("config %+v for --delivery %s", eo, d.mode)
				}
				return
			}
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %v: want a usage error (exit 2)", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// The flags' defaults are the relay's.
func TestDeliveryFlagDefaults(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var d deliveryFlags
	d.register(fs)
	if err := fs.Parse([]string{"--delivery", "exactly-once"}); err != nil {
		t.Fatal(err)
	}
	eo, err := d.config(fs)
	if err != nil {
		t.Fatal(err)
	}
	if eo.Interval != 100*time.Millisecond || relay.DefaultTransactionInterval != 100*time.Millisecond || eo.MaxRecords != relay.DefaultTransactionMaxRecords ||
		eo.TransactionalID != "" || eo.CheckpointTopic != "cdc-relay-checkpoints" {
		t.Errorf("defaults %+v", *eo)
	}
}
