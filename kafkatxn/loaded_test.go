package kafkatxn

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// setLoadTest sets loadWait and loadAwaited for one test.
func setLoadTest(t *testing.T, wait time.Duration, awaited func()) {
	t.Helper()
	oldWait, oldAwaited := loadWait, loadAwaited
	loadWait, loadAwaited = wait, awaited
	t.Cleanup(func() { loadWait, loadAwaited = oldWait, oldAwaited })
}

// The wait before an epoch bump lasts until the client lists the partition: here, until the
// client's first produce to the topic stored the topic's partitions.
func TestTheWaitForAPartitionEndsWhenTheClientListsIt(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "u"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	found := make(chan struct{})
	setLoadTest(t, time.Minute, func() { close(found) })
	w := &loadWatch{cl: cl}
	w.note(loadKey{"u", 0})
	if w.listed(loadKey{"u", 0}) {
		t.Fatal("the client lists u[0] before it ever produced to u")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan bool, 1)
	go func() { done <- w.await(ctx) }()
	<-found
	select {
	case <-done:
		t.Fatal("the wait ended before the client listed u[0]")
	default:
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "u", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Fatal("the wait ended without the client listing u[0]")
	}
}

// Commit and Abort end the transaction (and so bump the epoch) only after waiting for every
// partition written to be listed by the client: here one it never lists, so each waits its
// bound and then ends the transaction anyway.
func TestCommitAndAbortWaitForThePartitionsWrittenBeforeTheyEndTheTransaction(t *testing.T) {
	var awaited, endedBeforeTheWait atomic.Bool
	var ends atomic.Int32
	setLoadTest(t, 20*time.Millisecond, func() { awaited.Store(true) })
	p, err := fakeProducer(t, func(c *kfake.Cluster) {
		c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			ends.Add(1)
			if !awaited.Load() {
				endedBeforeTheWait.Store(true)
			}
			return nil, nil, false
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, end := range []string{"commit", "abort"} {
		awaited.Store(false)
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		if err := p.Client().ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		p.loads.note(loadKey{"t", 9}) // t has one partition: never listed
		before := ends.Load()
		if end == "commit" {
			err = p.Commit(ctx, Checkpoint{Slot: "s", Position: 0x100})
		} else {
			err = p.Abort(ctx)
		}
		if err != nil {
			t.Fatalf("%s: %v", end, err)
		}
		if ends.Load() != before+1 {
			t.Fatalf("%s sent %d EndTxn requests, want 1", end, ends.Load()-before)
		}
		if endedBeforeTheWait.Load() {
			t.Fatalf("%s ended the transaction without waiting for t[9] to be listed", end)
		}
	}
}
