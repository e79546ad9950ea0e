package kafkatxn

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The coordinator answers EndTxn once it logged PrepareCommit, and writes the commit markers into
// the transaction's partitions after that. A transaction that begins at once and produces to one
// of those partitions is not added to it until the markers are written: the partition's leader
// (KIP-890) or the coordinator answers CONCURRENT_TRANSACTIONS, and the broker waits out
// add.partitions.to.txn.retry.backoff.ms (20 ms by default) before it tries again. Committing
// back to back, as the relay does when it is caught up, every transaction paid those 20 ms though
// the markers took about one.
//
// awaitCompleted closes that gap: after a commit it asks the coordinator for the transaction's
// state (DescribeTransactions, which the id's WRITE permission allows) until it is no longer
// PrepareCommit, so Commit returns when read_committed consumers can read the transaction and
// the next one's first produce is added at once. It is a wait only: whatever it meets (an old
// broker, a refusal, the bound) ends the wait, and the next produce waits at the broker as before.

// completionWait bounds the wait for a commit's markers. A variable for tests.
var completionWait = 5 * time.Second

// completionPoll is the first pause between two questions; each next one doubles, up to
// completionPollMax.
const (
	completionPoll    = 250 * time.Microsecond
	completionPollMax = 20 * time.Millisecond
)

// awaitCompleted waits until the coordinator completed the transaction this producer just
// ended, at most completionWait and within ctx.
func (p *Producer) awaitCompleted(ctx context.Context) {
	if p.noDescribe {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, completionWait)
	defer cancel()
	pause := completionPoll
	for {
		state, err := p.transactionState(ctx)
		switch {
		case errors.Is(err, errNoDescribe):
			p.noDescribe = true
			return
		case err != nil, state != "PrepareCommit" && state != "PrepareAbort":
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, completionPollMax)
	}
}

// errNoDescribe means the broker cannot or will not describe the transactional id: a broker
// before Kafka 3.0, or an ACL without DESCRIBE on it. The producer stops asking.
var errNoDescribe = errors.New("txn: the broker does not describe transactions to this client")

// transactionState is the coordinator's state of the producer's transactional id (Ongoing,
// PrepareCommit, CompleteCommit, ...).
func (p *Producer) transactionState(ctx context.Context) (string, error) {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{p.cfg.TransactionalID}
	resp, err := req.RequestWith(ctx, p.cl)
	switch {
	case errors.Is(err, kerr.UnsupportedVersion), errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return "", errNoDescribe
	case err != nil:
		return "", err
	case len(resp.TransactionStates) != 1:
		return "", errors.New("txn: describe transactions: no state in the answer")
	}
	st := resp.TransactionStates[0]
	if err := kerr.ErrorForCode(st.ErrorCode); err != nil {
		if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			return "", errNoDescribe
		}
		return "", err
	}
	return st.State, nil
}
