package replication

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
)

// Config configures a Stream. Zero fields take the defaults stated.
type Config struct {
	// Conn is the parsed PostgreSQL connection (password, TLS, hosts and fallbacks applied).
	// Required. The Stream connects with a copy that adds replication=database; its
	// ConnectTimeout (default 10s) also bounds starting a session.
	Conn *pgx.ConnConfig
	// Slot is the logical replication slot (pgoutput). Required.
	Slot string
	// Publications are passed to pgoutput as publication_names. Required.
	Publications []string
	// StatusInterval is how often a standby status update is sent. Default 10s. Keep it
	// well below the server's wal_sender_timeout (default 60s).
	StatusInterval time.Duration
	// ConfirmDelay is how soon after the confirmed position advances a status update carries
	// it (coalesced): what a kill -9 replays is what was confirmed in the last ConfirmDelay.
	// StatusInterval stays the heartbeat. Default 100ms; negative: only every StatusInterval.
	ConfirmDelay time.Duration
	// MinBackoff and MaxBackoff bound the exponential backoff between reconnects.
	// Defaults 250ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// StandbyRetry is how often a standby asks for a slot that another process holds.
	// Default 2s.
	StandbyRetry time.Duration
	// ReceiveTimeout ends a session from which nothing arrived for this long, as PostgreSQL's
	// wal_receiver_timeout does: a network that went silent with the sockets still open
	// (a partition, a lost host, a NAT or load balancer that dropped the connection's state)
	// would otherwise leave the stream waiting for good. Every heartbeat status update asks
	// the server to reply, and the heartbeat comes at least every ReceiveTimeout/2 (sooner
	// than StatusInterval if that is longer), so a healthy quiet server is always heard in
	// time. Default 60s (wal_receiver_timeout's); negative: never.
	ReceiveTimeout time.Duration
	// OnSessionLost, when set, is called on Run's goroutine as soon as a session that streamed
	// ends for any reason but a cancel (the connection, the walsender, a silent network): from
	// then on another process may hold the slot, before the KindReset that starts the next
	// session goes down the channel. It must not block for long.
	OnSessionLost func(cause error)
	// OnDrain, when set, is called on Run's goroutine when the stream starts draining a backlog
	// (true: the walsender sends transactions committed well before, reader.go) and when it
	// has caught up again (false), so the caller can give a drain more of the machine than
	// the stream needs while it keeps up (cmd/cdc-relay: GOMAXPROCS). It must not block.
	OnDrain func(draining bool)
	// Logger receives connection lifecycle logs. Default slog.Default().
	Logger *slog.Logger
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Conn == nil {
		errs = append(errs, errors.New("replication: no PostgreSQL connection configured"))
	}
	if err := slotfacts.CheckSlotName(c.Slot); err != nil {
		errs = append(errs, fmt.Errorf("replication: %w", err))
	}
	if len(c.Publications) == 0 {
		errs = append(errs, errors.New("replication: no publication"))
	}
	for _, p := range c.Publications {
		if err := slotfacts.CheckPublicationName(p); err != nil {
			errs = append(errs, fmt.Errorf("replication: %w", err))
		}
	}
	if c.StatusInterval < 0 {
		errs = append(errs, errors.New("replication: intervals must not be negative"))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.StatusInterval, 10 * time.Second},
		{&c.ConfirmDelay, 100 * time.Millisecond},
		{&c.MinBackoff, 250 * time.Millisecond},
		{&c.MaxBackoff, 30 * time.Second},
		{&c.StandbyRetry, 2 * time.Second},
		{&c.ReceiveTimeout, 60 * time.Second},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
