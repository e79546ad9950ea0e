package kafkatxn

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// FencedError says that a newer producer with the same transactional id fenced this one:
// another relay took the slot (a standby after this one paused past wal_sender_timeout, or a
// second relay started by mistake). Nothing of this producer's open transaction is visible to
// read_committed consumers; the new holder replays it from the checkpoint.
type FencedError struct {
	TransactionalID string
	Err             error // the coordinator's answer, PRODUCER_FENCED
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("%v (%s): %v; this relay stops without publishing, the holder replays its open transaction from the checkpoint", ErrFenced, e.TransactionalID, e.Err)
}

// Unwrap returns ErrFenced and the broker's error.
func (e *FencedError) Unwrap() []error { return []error{ErrFenced, e.Err} }

var (
	// ErrFenced is wrapped by every *FencedError: another producer took this slot's
	// transactional id. It is fatal for this relay: it must stop without publishing.
	ErrFenced = errors.New("another relay holds this slot's transactional id")
	// ErrNotCommitted is wrapped by a Commit error after which the transaction is aborted
	// and nothing of it is visible: its records must be produced again (replay them from the
	// slot, skipping what the last committed checkpoint covers).
	ErrNotCommitted = errors.New("the Kafka transaction was not committed, and nothing of it is visible")
	// ErrOutcomeUnknown is wrapped by a Commit error after which Kafka may or may not have
	// committed the transaction: confirm nothing, read the checkpoint again (ReadCheckpoint)
	// and replay from the slot, skipping what the checkpoint covers.
	ErrOutcomeUnknown = errors.New("the outcome of the Kafka commit is unknown")
	// ErrSpent is what a Producer returns once an EndTxn of its (a commit, or an abort) went
	// unanswered: make a new Producer on a new Kafka client, whose New takes the id again and
	// aborts what the unanswered request left open. The spent one cannot be healed: franz-go
	// would take the id back at the producer's old epoch (KIP-360), and Kafka refuses that with
	// PRODUCER_FENCED when the request reached a coordinator that restarted before it answered
	// (transactions version 2 bumps the epoch at each EndTxn, and a coordinator that reloads
	// its log forgets the epoch before it, seen on Kafka 4.4): a fence no other producer caused,
	// which a caller would take for another relay holding the slot.
	ErrSpent = errors.New("txn: this producer's last commit or abort went unanswered; make a new Producer on a new Kafka client (it takes the transactional id again)")
	// ErrNoSlot is returned by Config.Validate when the slot is not named.
	ErrNoSlot = errors.New("txn: the slot is not named: the transactional id and the checkpoint key derive from it")
)

// IsFenced reports whether err says that a newer producer took this producer's transactional
// id. PRODUCER_FENCED is the coordinator's answer (InitProducerID, AddPartitionsToTxn,
// EndTxn); INVALID_PRODUCER_EPOCH is a partition leader's (a produce at an epoch older than
// the newest producer's: KIP-588 made it abortable, but under KIP-890's epoch bump per
// transaction the abort that follows meets PRODUCER_FENCED whenever another producer took the
// id, and this package reports the fence once the abort says so: after a transaction the
// coordinator aborted on its timeout, which bumps the epoch too, the abort succeeds).
func IsFenced(err error) bool {
	return errors.Is(err, ErrFenced) || errors.Is(err, kerr.ProducerFenced)
}

// fenced wraps err in a *FencedError when it is a fence, and returns it unchanged otherwise.
func fenced(id string, err error) error {
	if err == nil || errors.Is(err, ErrFenced) {
		return err
	}
	if errors.Is(err, kerr.ProducerFenced) {
		return &FencedError{TransactionalID: id, Err: err}
	}
	return err
}

// Transient reports whether err, from New or ReadCheckpoint, may pass by itself, so that the
// call is worth making again after a wait: a broker that is starting or restarting (a
// connection refused, cut or timed out), a partition whose leader is being elected
// (LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER), a transaction coordinator still loading its
// log (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE), a request that timed out:
// every error Kafka marks retriable, and every broker error franz-go would retry.
//
// Not transient, because waiting does not change them: a fence (another relay took the
// transactional id), a checkpoint topic that is missing (*TopicMissingError: the relay created
// or checked it at start, so it was deleted since) or deletes by retention, a checkpoint that
// does not decode, an authorization or SASL failure, a closed client, and the end of the
// caller's context (the caller checks its own context first: a request's own deadline that
// ran out is a timeout like any other).
func Transient(err error) bool {
	var missing *TopicMissingError
	var notCompacted *NotCompactedError
	switch {
	case err == nil, IsFenced(err), errors.As(err, &missing), errors.As(err, &notCompacted),
		errors.Is(err, kgo.ErrClientClosed), errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, context.DeadlineExceeded), kgo.IsRetryableBrokerErr(err):
		return true
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Retriable
	}
	// A refused dial: franz-go leaves it to its callers (a mistyped address should fail fast),
	// but New and ReadCheckpoint run after the relay reached the same brokers, so a broker that
	// refuses now is restarting.
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" {
		return true
	}
	return false
}
