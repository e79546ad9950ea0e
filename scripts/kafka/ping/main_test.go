package main

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The readiness check answers yes only for a broker that answers ApiVersions: not for a
// closed port, nor for a server that speaks another protocol, nor for one that accepts the
// connection and never answers (a paused broker), within its timeout.
func TestPing(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := ping(c.ListenAddrs()[0], 5*time.Second); err != nil {
		t.Errorf("a broker: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	if err := ping(closed, 2*time.Second); err == nil {
		t.Error("a closed port: no error")
	}

	for name, answer := range map[string][]byte{"another protocol": []byte("HTTP/1.1 400 Bad Request\r\n\r\n"), "a silent server": nil} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			var conns []net.Conn
			for {
				conn, err := l.Accept()
				if err != nil {
					for _, c := range conns {
						c.Close()
					}
					return
				}
				if answer != nil {
					_, _ = conn.Write(answer)
				}
				conns = append(conns, conn)
			}
		}()
		start := time.Now()
		if err := ping(l.Addr().String(), time.Second); err == nil {
			t.Errorf("%s: no error", name)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: answered after %s, want within about its 1s timeout", name, took)
		}
		l.Close()
	}
}
