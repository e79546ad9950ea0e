package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/proc"
)

// supervisor runs the relay the way systemd or Kubernetes would: restarts it whenever it
// exits, and kills it -9 on a schedule. An exit it did not cause is counted as unexpected.
type supervisor struct {
	s *soak

	mu         sync.Mutex
	relay      *proc.Process
	killed     int // the generation killed -9 on purpose
	gen        int
	kills      int
	unexpected int
	stopped    bool
	watchers   sync.WaitGroup
}

func newSupervisor(s *soak) *supervisor { return &supervisor{s: s} }

// start runs a new relay process and waits until it streams.
func (p *supervisor) start(ctx context.Context) error {
	p.s.faultMu.Lock()
	defer p.s.faultMu.Unlock()
	p.mu.Lock()
	p.gen++
	gen := p.gen
	logPath := filepath.Join(p.s.cfg.LogDir, fmt.Sprintf("relay-%d.log", gen))
	f, err := os.Create(logPath)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	relay, err := proc.Start(f, nil, p.s.cfg.RelayBin, "run", "--pg-url", p.s.cfg.PGURL, "--brokers", strings.Join(p.s.cfg.Brokers, ","),
		"--slot", p.s.cfg.Name, "--publication", p.s.cfg.Name, "--dlq-topic", p.s.dlq,
		"--status-interval", "1s", "--metrics-addr", "",
		// Startup waits for Kafka longer than the pause lasts.
		"--kafka-timeout", (p.s.cfg.Pause + time.Minute).String())
	if err != nil {
		f.Close()
		p.mu.Unlock()
		return fmt.Errorf("chaos: %w", err)
	}
	p.relay = relay
	p.mu.Unlock()

	p.watchers.Add(1)
	go func() {
		defer p.watchers.Done()
		<-relay.Done()
		f.Close()
		p.mu.Lock()
		expected := p.killed == gen || p.stopped
		if !expected {
			p.unexpected++
		}
		p.mu.Unlock()
		if !expected {
			p.s.logf("relay #%d exited on its own (%v); see %s; restarting", gen, relay.Err(), logPath)
			go func() {
				if err := p.ensureRunning(context.Background()); err != nil {
					p.s.logf("relay #%d: restart: %v", gen, err)
				}
			}()
		}
	}()
	// Wait until it streams (or exits).
	deadline := time.Now().Add(p.s.cfg.Pause + 2*time.Minute)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		if bytes.Contains(b, []byte("msg=streaming")) {
			return nil
		}
		select {
		case <-relay.Done():
			return nil // counted; ensureRunning restarts it
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("chaos: relay #%d did not start streaming; see %s", gen, logPath)
}

// ensureRunning starts a relay unless one runs.
func (p *supervisor) ensureRunning(ctx context.Context) error {
	p.mu.Lock()
	running := p.relay != nil && !p.relay.Exited()
	stopped := p.stopped
	p.mu.Unlock()
	if running || stopped {
		return nil
	}
	return p.start(ctx)
}

// killLoop kills the relay -9 every KillEvery (±50%) and starts a new one, until ctx ends or
// MaxKills is reached.
func (p *supervisor) killLoop(ctx context.Context) {
	for p.s.cfg.MaxKills == 0 || p.kills < p.s.cfg.MaxKills {
		d := time.Duration(float64(p.s.cfg.KillEvery) * (0.5 + p.s.killRng.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		p.mu.Lock()
		relay, gen := p.relay, p.gen
		p.killed = gen
		p.mu.Unlock()
		if relay != nil && !relay.Exited() {
			relay.Kill()
			p.kills++
			p.s.event("kill", p.kills)
			p.s.logf("relay #%d killed -9 (kill %d)", gen, p.kills)
		}
		if err := p.start(context.Background()); err != nil {
			p.s.logf("%v", err)
		}
	}
}

// stop stops the relay with SIGTERM (a clean shutdown) and keeps it stopped.
func (p *supervisor) stop() {
	p.mu.Lock()
	p.stopped = true
	relay := p.relay
	p.mu.Unlock()
	if relay != nil {
		_ = relay.Stop(45 * time.Second)
	}
	p.watchers.Wait()
}
