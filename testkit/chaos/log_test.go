package chaos

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// The soak's log is written by the writer, the kill loop and the fault injector at once, into
// a caller's plain io.Writer (a bytes.Buffer in the e2e test): logf serializes them. Under
// -race this fails if it does not; without, a lost or torn line fails the count.
func TestLogfConcurrent(t *testing.T) {
	var buf bytes.Buffer
	s := &soak{log: &buf}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				s.logf("goroutine %d line %d", g, i)
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "[chaos ") || !strings.Contains(l, " line ") {
			t.Fatalf("torn line %q", l)
		}
	}
}
