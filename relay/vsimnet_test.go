package relay

import (
	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/simwal"
)

// The harness's network: TCP on 127.0.0.1 (the real-time simulation), or, with h.vnet set, one
// in-memory network (net.Pipe connections) for kfake, every franz-go client and the scripted
// walsender, which is what lets a testing/synctest bubble hold them all (vsim_test.go).

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
	return []kgo.Opt{kgo.Dialer(h.vnet.DialContext)}
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
