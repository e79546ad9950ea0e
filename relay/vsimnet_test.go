package relay

import (
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/simwal"
)

// The harness's network: TCP on 127.0.0.1 (the real-time simulation), or, with h.vnet set, one
// in-memory network (testkit/memnet: a queue each way, as a socket has) for kfake, every
// franz-go client and the scripted walsender, which is what lets a testing/synctest bubble
// hold them all (vsim_test.go).

func (h *harness) clusterOpts() []kfake.Opt {
	if h.vnet == nil {
		return nil
	}
	return []kfake.Opt{kfake.ListenFn(h.vnet.Listen), kfake.Ports(9092)}
}

func (h *harness) netOpts() []kgo.Opt {
	if h.vnet == nil {
		return nil
	}
	// kfake asks for client telemetry (KIP-714), which costs a compressed push per interval,
	// a tenth of a short schedule's CPU; the relay's production clients keep it.
	return []kgo.Opt{kgo.Dialer(h.vnet.DialContext), kgo.DisableClientMetrics()}
}

// indexOpts are the kafkaIndex's: on virtual time its fetches, which franz-go sends all the
// time in the background, wait up to a minute for records instead of 20ms (a wake-up each).
func (h *harness) indexOpts() []kgo.Opt {
	if h.vnet == nil {
		return nil
	}
	return append(h.netOpts(), kgo.FetchMaxWait(time.Minute))
}

func (h *harness) newServer(slot string, start pglogrepl.LSN) (*simwal.Server, error) {
	if h.vnet == nil {
		return simwal.New(slot, start)
	}
	ln, err := h.vnet.Listen("tcp", "127.0.0.1:5432")
	if err != nil {
		return nil, err
	}
	return simwal.NewOn(ln, h.vnet.DialContext, slot, start), nil
}

func (h *harness) samplePeriod() time.Duration {
	if h.sampleEvery == 0 {
		return time.Millisecond
	}
	return h.sampleEvery
}

// chanMutex is a mutex for what is held across a wait on the bubble's clock (kafkaIndex.refresh
// holds its lock across fetches, which end on a timer): a goroutine waiting for a sync.Mutex is
// not durably blocked, so while one waits the clock of a testing/synctest bubble cannot move, and
// the holder's timer never fires (seed 4380 hung so: a status check refreshing the index while
// the harness waited to read it). A goroutine waiting on a channel is durably blocked. Make it
// with make(chanMutex, 1).
type chanMutex chan struct{}

func (m chanMutex) Lock()   { m <- struct{}{} }
func (m chanMutex) Unlock() { <-m }
