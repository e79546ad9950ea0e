// Package demo holds what the demo services (outbox-demo, order-service, order-consumer) share:
// the order tables they write, the topic they create and the way their commands read a
// subcommand and its flags.
package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// OrdersTables is the DDL of the demo's orders table and the outbox its transactions write
// to, under the (quoted or bare) names orders and outbox.
func OrdersTables(orders, outbox string) string {
	return `
CREATE TABLE IF NOT EXISTS ` + orders + ` (
    id          BIGSERIAL   PRIMARY KEY,
    customer_id TEXT        NOT NULL,
    amount      NUMERIC     NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS ` + outbox + ` (
    id            BIGSERIAL    PRIMARY KEY,
    aggregate_id  TEXT         NOT NULL,
    topic         TEXT         NOT NULL,
    payload       JSONB        NOT NULL,
    event_type    TEXT,
    headers       JSONB,
    created_at    TIMESTAMPTZ  NOT NULL DEFAULT now(),
    published_at  TIMESTAMPTZ  NULL
);`
}

// CreateTopic creates the demo's topic, with 3 partitions; created is false when it exists
// already, which is no error.
func CreateTopic(ctx context.Context, adm *kadm.Client, topic string) (created bool, err error) {
	_, err = adm.CreateTopic(ctx, 3, 1, nil, topic)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, kerr.TopicAlreadyExists):
		return false, nil
	}
	return false, fmt.Errorf("create topic %s: %w", topic, err)
}

// Subcommand returns the command's first argument and a flag set for it named
// "<command> <subcommand>"; without an argument it prints usage and exits 2.
func Subcommand(command, usage string) (string, *flag.FlagSet) {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	cmd := os.Args[1]
	return cmd, flag.NewFlagSet(command+" "+cmd, flag.ExitOnError)
}

// EnvOr is the environment variable k, or def when it is unset or empty.
func EnvOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
