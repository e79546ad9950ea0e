package e2e

import (
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// walSenderURL is the test's PostgreSQL URL, through host:port unless host is "", with the
// walsender's timeout set to walSenderTimeout for the relay's sessions (wal_sender_timeout is
// a user setting).
func walSenderURL(t *testing.T, host, walSenderTimeout string) string {
	t.Helper()
	u, err := url.Parse(testenv.PGURL(t))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		u.Host = host
	}
	q := u.Query()
	q.Set("options", "-cwal_sender_timeout="+walSenderTimeout)
	u.RawQuery = q.Encode()
	return u.String()
}

// A network that stops forwarding both ways while the sockets stay open (a partition, a lost
// host, a NAT or load balancer that dropped the connection's state) wedged the relay: it stayed
// "streaming", /readyz said ready, and rows committed afterwards never arrived (210 s observed).
// Now nothing heard from PostgreSQL for --receive-timeout ends the session, says why, makes
// /readyz not ready, and the relay reconnects: here through the same proxy, whose new
// connections are forwarded, and takes the slot once the silent session's walsender timed out.
func TestSilentNetworkEndsTheSessionAndReconnects(t *testing.T) {
	measureSilentNetwork(t, "5s", "5s", 20*time.Second)
}

// The same with the defaults (--receive-timeout 60s, the server's wal_sender_timeout 60s):
// the relay streams again within wal_sender_timeout + 10 s. A minute long, so only with
// CDC_RELAY_MEASURE=1.
func TestSilentNetworkReconnectsWithTheDefaults(t *testing.T) {
	if os.Getenv("CDC_RELAY_MEASURE") == "" {
		t.Skip("a measurement of over a minute: set CDC_RELAY_MEASURE=1")
	}
	measureSilentNetwork(t, "", "60s", 70*time.Second)
}

func measureSilentNetwork(t *testing.T, receiveTimeout, walSenderTimeout string, within time.Duration) {
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	cc := testenv.PGConfig(t)
	proxy := testenv.NewProxy(t, net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
	args := []string{"--pg-url", walSenderURL(t, proxy.Addr(), walSenderTimeout), "--metrics-addr", "127.0.0.1:0"}
	if receiveTimeout != "" {
		args = append(args, "--receive-timeout", receiveTimeout)
	}
	p := e.Start(t, nil, args...)
	addr := metricsAddr(t, p)
	testenv.Eventually(t, 60*time.Second, "/readyz to be 200", func() bool {
		code, _ := httpGet(t, addr, "/readyz")
		return code == http.StatusOK
	})
	cons := testenv.Consume(t, f.Topic)
	before := f.Insert(t, false, testenv.Row{Key: "k", Payload: `{"n":1}`})
	cons.WaitFor(t, 30*time.Second, "the row before the silence", testenv.HasAll(before))

	if n := proxy.Silence(); n == 0 {
		t.Fatal("no connection to silence")
	}
	silenced := time.Now()
	after := f.Insert(t, false, testenv.Row{Key: "k", Payload: `{"n":2}`})
	var notReady time.Duration
	testenv.Eventually(t, within, "/readyz to say not ready", func() bool {
		code, _ := httpGet(t, addr, "/readyz")
		notReady = time.Since(silenced)
		return code != http.StatusOK
	})
	cons.WaitFor(t, within, "the row committed during the silence", testenv.HasAll(after))
	arrived := time.Since(silenced)
	testenv.Eventually(t, 30*time.Second, "/readyz to be 200 again", func() bool {
		code, _ := httpGet(t, addr, "/readyz")
		return code == http.StatusOK
	})
	streaming := time.Since(silenced)
	out := p.Output()
	if !strings.Contains(out, "no message from PostgreSQL for") {
		t.Errorf("the relay did not log why the session ended:\n%s", out)
	}
	t.Logf("receive timeout %q, wal_sender_timeout %s: /readyz not ready %s after the silence, the row committed during it in Kafka after %s, ready again after %s",
		receiveTimeout, walSenderTimeout, notReady.Round(100*time.Millisecond), arrived.Round(100*time.Millisecond), streaming.Round(100*time.Millisecond))
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}
