package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/proc"
)

// appPrefix starts the application_name of every relay the soak runs: the slot's holder is
// the relay whose name its walsender's pg_stat_activity row carries.
const appPrefix = "cdc-chaos-relay-"

// relayProc is one relay process: its generation (from 1, also its log's number) and seat.
type relayProc struct {
	gen  int
	seat int
	p    *proc.Process
	log  string
}

// supervisor runs the relays the way systemd or Kubernetes would: one per seat (two, unless
// NoStandby: the second waits as a standby), each restarted whenever it exits; it kills the
// slot's holder -9 on a schedule and makes it a zombie once. An exit it did not cause is
// counted as unexpected.
type supervisor struct {
	s *soak

	mu         sync.Mutex
	seats      []*relayProc
	expected   map[int]bool // generations whose exit the soak caused: killed -9, the zombie
	gen        int
	kills      int
	unexpected int
	// outageExits are the exactly-once relays' exits put down to an outage (Result.OutageExits).
	outageExits []string
	takeovers   []time.Duration
	byStandby   int // takeovers by the other seat's relay, not the killed one's restart
	zombieNote  string
	stopped     bool
	watchers    sync.WaitGroup

	// faults holds the kills back while the zombie is paused: it must stay the holder until
	// its walsender times out, and a kill of the standby would only delay the takeover.
	faults sync.Mutex
}

func newSupervisor(s *soak) *supervisor {
	n := 2
	if s.cfg.NoStandby {
		n = 1
	}
	return &supervisor{s: s, seats: make([]*relayProc, n), expected: map[int]bool{}}
}

// begin starts the first relay and waits until it holds the slot, then the standby.
func (p *supervisor) begin(ctx context.Context) error {
	if err := p.start(0); err != nil {
		return err
	}
	if _, err := p.waitHolder(ctx, 0); err != nil {
		return err
	}
	for seat := 1; seat < len(p.seats); seat++ {
		if err := p.start(seat); err != nil {
			return err
		}
	}
	return nil
}

// relayURL is the PostgreSQL URL of relay gen: named by its application_name, with the
// soak's wal_sender_timeout for its sessions.
func (p *supervisor) relayURL(gen int) string {
	app := appPrefix + strconv.Itoa(gen)
	opt := "-cwal_sender_timeout=" + strconv.FormatInt(p.s.cfg.WalSenderTimeout.Milliseconds(), 10) + "ms"
	u, err := url.Parse(p.s.cfg.PGURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return p.s.cfg.PGURL + " application_name=" + app + " options=" + opt // a key=value string
	}
	q := u.Query()
	q.Set("application_name", app)
	q.Set("options", strings.TrimSpace(q.Get("options")+" "+opt))
	u.RawQuery = q.Encode()
	return u.String()
}

// start runs a new relay process in seat; it does not wait for it to stream (it may be the
// standby).
func (p *supervisor) start(seat int) error {
	p.s.faultMu.Lock()
	defer p.s.faultMu.Unlock()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.gen++
	gen := p.gen
	logPath := filepath.Join(p.s.cfg.LogDir, fmt.Sprintf("relay-%d.log", gen))
	f, err := os.Create(logPath)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	args := []string{"run", "--pg-url", p.relayURL(gen), "--brokers", strings.Join(p.s.cfg.Brokers, ","),
		"--slot", p.s.cfg.Name, "--publication", p.s.cfg.Name, "--dlq-topic", p.s.dlq,
		"--status-interval", "1s", "--metrics-addr", "",
		// Startup waits for Kafka longer than the pause lasts.
		"--kafka-timeout", (p.s.cfg.Pause + time.Minute).String()}
	if p.s.cfg.Delivery == ExactlyOnce {
		args = append(args, "--delivery", ExactlyOnce, "--checkpoint-topic", p.s.ckpt)
	}
	relay, err := proc.Start(f, nil, p.s.cfg.RelayBin, append(args, p.s.cfg.RelayArgs...)...)
	if err != nil {
		f.Close()
		p.mu.Unlock()
		return fmt.Errorf("chaos: %w", err)
	}
	rp := &relayProc{gen: gen, seat: seat, p: relay, log: logPath}
	p.seats[seat] = rp
	p.mu.Unlock()

	p.watchers.Add(1)
	go func() {
		defer p.watchers.Done()
		<-relay.Done()
		f.Close()
		outage := p.s.cfg.Delivery == ExactlyOnce && p.s.inOutage()
		p.mu.Lock()
		expected, stopped := p.expected[gen], p.stopped
		switch {
		case expected || stopped:
		case outage:
			p.outageExits = append(p.outageExits, fmt.Sprintf("relay #%d: %s", gen, lastError(logPath)))
		default:
			p.unexpected++
		}
		p.mu.Unlock()
		if stopped {
			return
		}
		switch {
		case expected:
		case outage:
			p.s.logf("relay #%d exited during an outage (%v); see %s; restarting", gen, relay.Err(), logPath)
		default:
			p.s.logf("relay #%d exited on its own (%v); see %s; restarting", gen, relay.Err(), logPath)
		}
		// Started again at once, as a supervisor would.
		if err := p.start(seat); err != nil {
			p.s.logf("relay #%d: restart: %v", gen, err)
		}
	}()
	return nil
}

// holder returns the generation of the relay whose session holds the slot, 0 if none does
// (or PostgreSQL does not answer).
func (p *supervisor) holder(ctx context.Context) int {
	var app string
	err := p.s.pool.QueryRow(ctx, `SELECT coalesce(a.application_name, '') FROM pg_replication_slots s
		LEFT JOIN pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = $1`, p.s.cfg.Name).Scan(&app)
	if err != nil || !strings.HasPrefix(app, appPrefix) {
		return 0
	}
	gen, _ := strconv.Atoi(strings.TrimPrefix(app, appPrefix))
	return gen
}

// waitHolder waits until a relay other than generation not holds the slot and returns it.
func (p *supervisor) waitHolder(ctx context.Context, not int) (int, error) {
	timeout := p.s.cfg.Pause + 2*time.Minute
	deadline := time.Now().Add(timeout)
	for {
		if gen := p.holder(ctx); gen != 0 && gen != not {
			return gen, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("chaos: no relay took the slot within %s; see the logs in %s", timeout, p.s.cfg.LogDir)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// process returns relay gen if it still runs.
func (p *supervisor) process(gen int) *relayProc {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rp := range p.seats {
		if rp != nil && rp.gen == gen && !rp.p.Exited() {
			return rp
		}
	}
	return nil
}

// ensureRunning starts a relay in every seat whose relay has exited.
func (p *supervisor) ensureRunning() error {
	var errs []error
	for seat := range p.seats {
		p.mu.Lock()
		rp, stopped := p.seats[seat], p.stopped
		p.mu.Unlock()
		if !stopped && (rp == nil || rp.p.Exited()) {
			errs = append(errs, p.start(seat))
		}
	}
	return errors.Join(errs...)
}

// killLoop kills the slot's holder -9 every KillEvery (±50%), until ctx ends or MaxKills is
// reached; its seat starts a new relay at once, and the next kill waits until a relay (the
// standby, or the new one) holds the slot again.
func (p *supervisor) killLoop(ctx context.Context) {
	for p.s.cfg.MaxKills == 0 || p.kills < p.s.cfg.MaxKills {
		d := time.Duration(float64(p.s.cfg.KillEvery) * (0.5 + p.s.killRng.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		if err := p.killHolder(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			p.s.logf("%v", err)
		}
	}
}

// openWait bounds how long a fault waits for the holder to have a Kafka transaction open with
// records in it (exactly-once); after the writing there is none, and the fault goes ahead.
const openWait = 3 * time.Second

// awaitOpenTransaction, with exactly-once delivery, waits until the slot's holder has written
// records of a Kafka transaction it has not ended, so that the kill -9 or the SIGSTOP that
// follows leaves an aborted transaction behind for the read_committed reader to skip: a kill
// between two transactions proves nothing about them. It returns what the fault's log line
// says about it.
func (p *supervisor) awaitOpenTransaction(ctx context.Context) string {
	if p.s.v == nil || p.s.v.markers == nil {
		return ""
	}
	if n := p.s.v.markers.awaitOpen(ctx, openWait); n > 0 {
		return fmt.Sprintf(", its open Kafka transaction holding %d records on the partition last written", n)
	}
	return fmt.Sprintf(", no Kafka transaction seen open within %s", openWait)
}

// holderToFault waits for an open Kafka transaction (awaitOpenTransaction) and for the
// slot's holder, and marks its exit expected; nil if it exited meanwhile. open is what the
// fault's log line says about the transaction. The caller holds p.faults.
func (p *supervisor) holderToFault(ctx context.Context) (rp *relayProc, open string, err error) {
	open = p.awaitOpenTransaction(ctx)
	gen, err := p.waitHolder(ctx, 0)
	if err != nil {
		return nil, open, err
	}
	rp = p.process(gen)
	if rp != nil {
		p.mu.Lock()
		p.expected[gen] = true
		p.mu.Unlock()
	}
	return rp, open, nil
}

func (p *supervisor) killHolder(ctx context.Context) error {
	p.faults.Lock()
	defer p.faults.Unlock()
	rp, open, err := p.holderToFault(ctx)
	if rp == nil || err != nil {
		return err // none, or it exited meanwhile: the next round finds the next holder
	}
	gen := rp.gen
	rp.p.Kill()
	killed := time.Now()
	p.kills++
	p.s.event("kill", p.kills)
	p.s.logf("relay #%d killed -9 (kill %d)%s", gen, p.kills, open)
	next, err := p.waitHolder(ctx, gen)
	if err != nil {
		return err
	}
	took := time.Since(killed)
	p.mu.Lock()
	p.takeovers = append(p.takeovers, took)
	by := "the killed relay's restart"
	for _, x := range p.seats {
		if x != nil && x.gen == next && x.seat != rp.seat {
			p.byStandby++
			by = "the standby"
		}
	}
	p.mu.Unlock()
	p.s.logf("relay #%d (%s) holds the slot, %s after the kill", next, by, took.Round(time.Millisecond))
	return nil
}

// zombie stops the slot's holder with SIGSTOP, as a long GC pause or a frozen VM would, until
// its walsender's timeout ended its session, the standby took the slot and the topic got
// records since; then it resumes it. From then on its exit is expected: with exactly-once
// delivery a zombie is fenced and exits 1 (DESIGN.md, E4), with at-least-once it aborts what
// it buffered and waits as a standby (rule 9). What it did is Result.Zombie.
func (p *supervisor) zombie(ctx context.Context) error {
	p.faults.Lock()
	defer p.faults.Unlock()
	rp, open, err := p.holderToFault(ctx)
	if rp == nil || err != nil {
		p.s.logf("zombie: the slot's holder exited before it could be paused (%v)", err)
		return err
	}
	gen := rp.gen
	rp.p.Send(syscall.SIGSTOP)
	paused := time.Now()
	p.s.event("zombie", 0)
	p.s.logf("zombie: relay #%d paused (SIGSTOP) while it holds the slot%s", gen, open)
	next, err := p.waitHolder(ctx, gen)
	if err != nil {
		rp.p.Send(syscall.SIGCONT)
		return err
	}
	took := time.Since(paused)
	// The new holder publishes while the zombie still sleeps: what the zombie had open must not
	// land after it.
	before := p.s.v.records()
	deadline := time.Now().Add(time.Minute)
	for p.s.v.records() <= before && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	seen, _ := os.ReadFile(rp.log)
	rp.p.Send(syscall.SIGCONT)
	pausedFor := time.Since(paused)
	p.s.logf("zombie: relay #%d took the slot %s after the pause; relay #%d resumed after %s", next, took.Round(time.Millisecond), gen, pausedFor.Round(time.Millisecond))
	// Wait for what the zombie does once it wakes: exit, or wait as a standby.
	var fate string
	for deadline = time.Now().Add(time.Minute); fate == "" && time.Now().Before(deadline) && ctx.Err() == nil; {
		select {
		case <-rp.p.Done():
			fate = fmt.Sprintf("exited %d", rp.p.ExitCode())
			if line := lastError(rp.log); line != "" {
				fate += ": " + line
			}
		case <-time.After(100 * time.Millisecond):
			if b, _ := os.ReadFile(rp.log); len(b) > len(seen) && strings.Contains(string(b[len(seen):]), "waiting as a standby") {
				fate = "lost the slot and waits as a standby"
			}
		}
	}
	if fate == "" {
		fate = "still running a minute after it woke, and not as a standby"
	}
	p.mu.Lock()
	p.zombieNote = fmt.Sprintf("relay #%d paused %s while it held the slot; relay #%d took the slot %s after the pause; once resumed the zombie %s",
		gen, pausedFor.Round(time.Millisecond), next, took.Round(time.Millisecond), fate)
	p.mu.Unlock()
	p.s.logf("zombie: relay #%d %s", gen, fate)
	return nil
}

// zombieFate is what the zombie did, for the result.
func (p *supervisor) zombieFate() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.zombieNote
}

// lastError returns the last error line of a relay's log: its "cdc-relay: ..." exit line, or
// its last level=ERROR line.
func lastError(path string) string {
	b, _ := os.ReadFile(path)
	last := ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "cdc-relay:") || strings.Contains(l, "level=ERROR") {
			last = l
		}
	}
	if len(last) > 300 {
		last = last[:300] + "..."
	}
	return last
}

// stop stops every relay with SIGTERM (a clean shutdown) and keeps them stopped.
func (p *supervisor) stop() {
	p.mu.Lock()
	p.stopped = true
	seats := append([]*relayProc(nil), p.seats...)
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, rp := range seats {
		if rp != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rp.p.Send(syscall.SIGCONT) // a zombie left paused by an abandoned run
				_ = rp.p.Stop(45 * time.Second)
			}()
		}
	}
	wg.Wait()
	p.watchers.Wait()
}
