package simwal

import (
	"context"
	"net"

	"github.com/jackc/pglogrepl"
)

// NewOn starts a server for slot on ln, whose slot is confirmed at start, and reached by dial:
// ConnConfig's connections then dial through it instead of TCP. With an in-memory network
// (testkit/memnet, or kfake.VirtualNetwork: Listen and DialContext), the server, its sessions
// and the client all live inside a testing/synctest bubble, where every wait is on the bubble's
// clock.
func NewOn(ln net.Listener, dial func(ctx context.Context, network, addr string) (net.Conn, error), slot string, start pglogrepl.LSN) *Server {
	return newServer(ln, dial, slot, start)
}
