package e2e

import (
	"bufio"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// metricsAddrLog matches the line in text and in JSON.
var metricsAddrLog = regexp.MustCompile(`msg="serving metrics and health" addr=(\S+)|"msg":"serving metrics and health","addr":"([^"]+)"`)

// metricsAddr waits for the relay to log the address its metrics server bound.
func metricsAddr(t *testing.T, p *testenv.Proc) string {
	t.Helper()
	var addr string
	testenv.Eventually(t, 30*time.Second, "the metrics server to listen", func() bool {
		if m := metricsAddrLog.FindStringSubmatch(p.Output()); m != nil {
			addr = m[1] + m[2]
			return true
		}
		return p.Exited()
	})
	if addr == "" {
		t.Fatalf("the relay exited before serving metrics:\n%s", p.Output())
	}
	return addr
}

// httpGet returns the status code and body of http://addr/path.
func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrape reads /metrics into a map from series (name and labels as exposed, e.g.
// `cdc_relay_replication_state{state="streaming"}`) to value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	return parseMetrics(t, body)
}

func parseMetrics(t *testing.T, body string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

// metricAtLeast waits until series reaches at least want and returns the last scrape.
func metricAtLeast(t *testing.T, addr, series string, want float64) map[string]float64 {
	t.Helper()
	var m map[string]float64
	testenv.Eventually(t, 60*time.Second, series+" >= "+strconv.FormatFloat(want, 'f', -1, 64), func() bool {
		m = scrape(t, addr)
		return m[series] >= want
	})
	return m
}
