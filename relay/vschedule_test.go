package relay

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// vschedule is a schedule of sim_test.go (newSchedule: every kind it has, unchanged) plus what
// only virtual time affords, drawn from a random stream of its own so that the base schedule
// stays the seed's: the settings users change (--confirm-delay, --status-interval, the reconnect
// back-off, franz-go's retry back-off) and, in one schedule of four, long faults: PostgreSQL
// unreachable for minutes, Kafka refusing every produce for minutes to an hour, the slot held
// by another process for minutes, produce answers held for up to an hour.
type vschedule struct {
	sc *schedule

	long         bool
	confirmDelay time.Duration // replication.Config.ConfirmDelay: 0 the default (100ms), <0 off
	minBackoff   time.Duration // replication.Config.MinBackoff / MaxBackoff
	maxBackoff   time.Duration
	standbyRetry time.Duration // replication.Config.StandbyRetry (the harness's 10ms: 0)
	kafkaRetry   time.Duration // franz-go's retry back-off (the first, with kafkaRetryMax)
	// kafkaRetryMax, if set, makes the back-off double from kafkaRetry up to it, as franz-go's
	// default does (without its jitter).
	kafkaRetryMax time.Duration
	sample        time.Duration // invariant (e)'s sampling period (harness.sample)

	// Exactly-once (vsimeos_test.go): every run of the schedule in that mode, with its
	// transaction interval and size, and per run the commit before whose confirm it crashes.
	eos           bool
	eosInterval   time.Duration
	eosMaxRecords int
	crashAfter    []int
	// eosTimeout is the Kafka transaction timeout (0: the default), set when eosInterval is
	// minutes long (drawEOS).
	eosTimeout time.Duration
}

func newVSchedule(seed uint64) *vschedule {
	sc := newSchedule(seed)
	rng := rand.New(rand.NewPCG(seed^0x7173, seed+0x5eed))
	vs := &vschedule{sc: sc, minBackoff: 2 * time.Millisecond, maxBackoff: 20 * time.Millisecond, kafkaRetry: 3 * time.Millisecond}
	vs.confirmDelay = []time.Duration{0, -1, time.Millisecond, 20 * time.Millisecond, time.Second}[rng.IntN(5)]
	if raceEnabled {
		// kfake's SleepControl, which holds a produce answer, races with itself (bsleep.enqueue
		// updates the head of the queue that bsleep.waitQueue reads, unlocked), and -race fails
		// the test for it: under -race a held answer is a refused one, Kafka down as long.
		for i := range sc.runs {
			for j := range sc.runs[i].faults {
				if f := &sc.runs[i].faults[j]; f.kind == faultSlow {
					f.kind, f.err = faultDown, kerr.NotLeaderForPartition
				}
			}
		}
	}
	vs.long = rng.IntN(4) == 0
	if vs.long {
		vs.lengthen(rng)
	}
	vs.drawEOS(rng)
	vs.offBeat()
	return vs
}

// offBeat moves every time the harness acts at (cancels, commits, outages, holds, faults) off
// the relay's own beat by a few odd nanoseconds: on virtual time two timers of round durations
// often fire at the same instant, and which of them the Go runtime runs first is random, so
// the trace of a seed would differ between runs (a hold released at 10m while the standby
// retry asks at 10m). The relay's own timers can still meet each other.
func (vs *vschedule) offBeat() {
	const (
		cancel = 7919 * time.Nanosecond
		commit = 1013 * time.Nanosecond
		outage = 3001 * time.Nanosecond
		hold   = 5003 * time.Nanosecond
		fault  = 6007 * time.Nanosecond
	)
	// The relay's settings too, each by its own amount, so that two of them started at one
	// instant do not end at one (a confirm delay and a status interval of 20ms).
	vs.sc.statusInterval += 1009 * time.Nanosecond
	if vs.confirmDelay > 0 {
		vs.confirmDelay += 2003 * time.Nanosecond
	}
	vs.minBackoff += 307 * time.Nanosecond
	vs.maxBackoff += 401 * time.Nanosecond
	vs.kafkaRetry += 503 * time.Nanosecond
	if vs.kafkaRetryMax > 0 {
		vs.kafkaRetryMax += 509 * time.Nanosecond
	}
	if vs.standbyRetry > 0 {
		vs.standbyRetry += 601 * time.Nanosecond
	}
	vs.sc.shutdown += 701 * time.Nanosecond
	vs.eosInterval += 809 * time.Nanosecond
	for i := range vs.sc.runs {
		run := &vs.sc.runs[i]
		run.cancelAfter += cancel
		if run.commitDelay > 0 {
			run.commitDelay += commit
		}
		if run.outageFor > 0 {
			run.outageAt += outage
		}
		if run.holdSlot > 0 {
			run.holdSlot += hold
		}
		for j := range run.faults {
			run.faults[j].after += fault
		}
	}
}

// lengthen gives a schedule timers of production size and long faults.
func (vs *vschedule) lengthen(rng *rand.Rand) {
	sc := vs.sc
	// Long: timers of production size, so that minutes of outage cost tens of retries, not
	// millions.
	sc.statusInterval = []time.Duration{time.Second, 10 * time.Second}[rng.IntN(2)]
	// The receive timeout too (the default, 60s, or 10s), from a stream of its own so that the
	// rest of the long schedule stays what it was: at the base schedule's 1s the heartbeat came
	// every 500ms, two round trips to the walsender a virtual second through hours of outage
	// (with the back-off below: long at-least-once schedules of seeds 1-2000 from 21.5 to 17.3
	// CPU-seconds).
	trng := rand.New(rand.NewPCG(sc.seed^0x71e0, sc.seed))
	sc.receiveTimeout = []time.Duration{10 * time.Second, 60 * time.Second}[trng.IntN(2)] + 1511*time.Nanosecond
	vs.minBackoff, vs.maxBackoff = 250*time.Millisecond, 30*time.Second
	vs.standbyRetry = 2 * time.Second
	// franz-go's default back-off: 250ms doubling to 5s. A fixed 1s (before) was five retries
	// of a refused partition for the product's one, through an hour of outage.
	vs.kafkaRetry, vs.kafkaRetryMax = 250*time.Millisecond, 5*time.Second
	vs.sample = 500 * time.Millisecond
	sc.shutdown = []time.Duration{time.Second, 30 * time.Second}[rng.IntN(2)]
	for i := range sc.runs {
		run := &sc.runs[i]
		end := run.cancelAfter
		if run.outageFor > 0 {
			run.outageFor = time.Duration(1+rng.IntN(30)) * time.Minute
			end = max(end, run.outageAt+run.outageFor)
		}
		if run.holdSlot > 0 {
			run.holdSlot = time.Duration(1+rng.IntN(10)) * time.Minute
			end = max(end, run.holdSlot)
		}
		for j := range run.faults {
			f := &run.faults[j]
			switch f.kind {
			case faultDown, faultDLQRefused:
				f.dur = time.Duration(1+rng.IntN(60)) * time.Minute
			case faultSlow:
				f.dur = time.Duration(1+rng.IntN(60)) * time.Minute // answers held dur/4
			default:
				continue
			}
			f.after = time.Duration(rng.IntN(10)) * time.Second
			end = max(end, f.after+f.dur)
		}
		// Most long runs are canceled after their faults ended (the recovery is what is
		// checked); the others in the middle of them.
		if rng.IntN(4) != 0 {
			run.cancelAfter = end + time.Duration(rng.IntN(60))*time.Second
		} else {
			run.cancelAfter = time.Duration(rng.Int64N(int64(end) + 1))
		}
		run.commitDelay *= 1000 // ms → s
	}
}

// tune applies the settings to a run's Config.
func (vs *vschedule) tune(c *Config) {
	c.Replication.ConfirmDelay = vs.confirmDelay
	c.Replication.MinBackoff, c.Replication.MaxBackoff = vs.minBackoff, vs.maxBackoff
	if vs.standbyRetry > 0 {
		c.Replication.StandbyRetry = vs.standbyRetry
	}
	first, most := vs.kafkaRetry, vs.kafkaRetryMax
	c.Sink.Opts = append(c.Sink.Opts, kgo.RetryBackoffFn(func(fails int) time.Duration {
		if most == 0 {
			return first
		}
		d := first
		for ; fails > 1 && d < most; fails-- {
			d *= 2
		}
		return min(d, most)
	}))
	if vs.eos {
		c.ExactlyOnce = &ExactlyOnce{Interval: vs.eosInterval, MaxRecords: vs.eosMaxRecords, TransactionTimeout: vs.eosTimeout}
	}
}

func (vs *vschedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  virtual time: long %v, confirm delay %s, reconnect back-off %s..%s, standby retry %s, Kafka retry back-off %s (up to %s)\n",
		vs.long, vs.confirmDelay, vs.minBackoff, vs.maxBackoff, vs.standbyRetry, vs.kafkaRetry, vs.kafkaRetryMax)
	b.WriteString(vs.eosString())
	return b.String()
}
