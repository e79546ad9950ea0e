package replication

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
	"github.com/cdc-relay/cdc-relay/internal/tlshint"
)

// The slot's and publication's sentinels are slotfacts' (ErrSlotMissing, ErrSlotActive,
// ErrSlotLost, ErrSlotWrongPlugin, ErrPublicationMissing), under one public name each:
// slotstore's. The stream's errors wrap them, so errors.Is(err, slotstore.ErrSlotMissing) holds
// for them too.

// ErrServerTooOld means the server is older than MinServerMajor.
var ErrServerTooOld = errors.New("PostgreSQL server is too old")

// MinServerMajor is the oldest PostgreSQL major the relay streams from: pgoutput's `messages`
// option (logical decoding messages, which the relay requests) is 14's.
const MinServerMajor = 14

// checkServerVersion refuses a server older than MinServerMajor by its server_version
// parameter, with what to do, instead of the walsender's "unrecognized pgoutput option". A
// version it cannot read (a proxy's) passes: the server decides then.
func checkServerVersion(version string) error {
	major := 0
	for _, c := range version {
		if c < '0' || c > '9' {
			break
		}
		major = major*10 + int(c-'0')
	}
	if major == 0 || major >= MinServerMajor {
		return nil
	}
	return fmt.Errorf("%w: the server is PostgreSQL %s, and cdc-relay needs %d or later "+
		"(pgoutput's messages option): upgrade the server, or point --pg-url at one that is %d or later",
		ErrServerTooOld, version, MinServerMajor, MinServerMajor)
}

// IsRetryable reports whether a failed session should be retried by reconnecting: the server
// is unreachable, was restarted or is starting, the connection was cut or the walsender was
// terminated. Configuration errors, authentication and TLS verification failures and a
// missing, lost or foreign slot are not retryable.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, slotfacts.ErrSlotActive):
		return true
	case errors.Is(err, slotfacts.ErrSlotMissing), errors.Is(err, slotfacts.ErrSlotLost),
		errors.Is(err, slotfacts.ErrSlotWrongPlugin), errors.Is(err, slotfacts.ErrPublicationMissing), errors.Is(err, ErrServerTooOld):
		return false
	}
	if tlsRefused(err) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgerrcode.IsConnectionException(pgErr.Code),
			pgErr.Code == pgerrcode.AdminShutdown, // pg_terminate_backend, fast shutdown
			pgErr.Code == pgerrcode.CrashShutdown,
			pgErr.Code == pgerrcode.CannotConnectNow, // starting up, shutting down
			pgErr.Code == pgerrcode.TooManyConnections,
			pgErr.Code == pgerrcode.DiskFull:
			return true
		}
		return false
	}
	// Anything else is the network: refused, reset, EOF, timeouts.
	return true
}

// tlsRefused reports a TLS failure that the same configuration meets again: a certificate that
// is not trusted or does not name the host, or a server that does not speak TLS.
func tlsRefused(err error) bool { return tlshint.Hint(err, tlshint.Words{}) != "" }

// classify maps a server error to the package's sentinels, keeping the server's words.
func classify(err error, slot string) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	if pgErr.Code == pgerrcode.UndefinedObject && strings.Contains(pgErr.Message, "publication") {
		return fmt.Errorf("%w: %w (create it with `cdc-relay slot create`, or fix --publication)", slotfacts.ErrPublicationMissing, err)
	}
	switch slotfacts.ServerSays(err) {
	case slotfacts.ErrSlotActive:
		return fmt.Errorf("%w: slot %q: %w", slotfacts.ErrSlotActive, slot, err)
	case slotfacts.ErrSlotMissing:
		return fmt.Errorf("%w: slot %q: %w (create it with `cdc-relay slot create --slot %s ...`)", slotfacts.ErrSlotMissing, slot, err, slot)
	case slotfacts.ErrSlotLost:
		return slotLostError(slot, lostCause(pgErr), err)
	}
	return err
}

// silentError ends a session from which nothing arrived for the receive timeout. It is
// retryable: the stream reconnects (to the next host of a multi-host URL if this one stays
// unreachable).
type silentError struct {
	quiet, timeout time.Duration
}

func (e *silentError) Error() string {
	return fmt.Sprintf("no message from PostgreSQL for %s (--receive-timeout %s), although the relay's status updates ask it to reply: "+
		"the network or the server went silent with the connection still open (a partition, a lost host, a NAT or load balancer "+
		"that dropped the connection); ending the session and reconnecting", e.quiet.Round(time.Millisecond), e.timeout)
}

// IsSilent reports whether err ended a session because the server went silent.
func IsSilent(err error) bool {
	var se *silentError
	return errors.As(err, &se)
}

// slotLostError says that the server invalidated the slot, and why as far as the relay can
// tell: wal_status lost means PostgreSQL removed WAL the slot needed (max_slot_wal_keep_size);
// otherwise the server's own detail names the cause (on 17+ also rows removed by VACUUM, an
// insufficient wal_level, idle_replication_slot_timeout), and `slot status` gives the
// invalidation_reason with what to do about it.
func slotLostError(slot, cause string, err error) error {
	return fmt.Errorf("%w: slot %q was invalidated: %s; `cdc-relay slot status --slot %s` shows its invalidation_reason and what "+
		"prevents it next time. Drop and re-create it with `cdc-relay slot drop --slot %s` and `cdc-relay slot create --slot %s ...`, "+
		"then republish the outbox rows written while it was lost (the polling publisher `cdc-relay poll` can do that from the table): %w",
		slotfacts.ErrSlotLost, slot, cause, slot, slot, slot, err)
}

// lostCause is what the server said about an invalidated slot: its detail when it gave one.
func lostCause(pgErr *pgconn.PgError) string {
	if pgErr.Detail != "" {
		return "PostgreSQL says: " + strings.TrimSuffix(pgErr.Detail, ".")
	}
	return "PostgreSQL can no longer decode changes from it"
}
