package sink

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRejectedClassifiesPermanentErrors(t *testing.T) {
	for _, err := range []error{kerr.MessageTooLarge, kerr.InvalidTopicException, kerr.TopicAuthorizationFailed, kerr.UnknownTopicOrPartition} {
		if !Rejected(err) {
			t.Errorf("%v should be rejected for good", err)
		}
	}
	for _, err := range []error{kerr.NotLeaderForPartition, kerr.RequestTimedOut, context.Canceled, kgo.ErrClientClosed, errors.New("x")} {
		if Rejected(err) {
			t.Errorf("%v should not count as rejected for good", err)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := (Config{}).Validate(); !errors.Is(err, ErrNoBrokers) {
		t.Errorf("no brokers: %v", err)
	}
	if err := (Config{Brokers: []string{""}}).Validate(); err == nil {
		t.Error("empty broker accepted")
	}
	if err := (Config{Brokers: []string{"a:1"}, MaxBufferedBytes: -1}).Validate(); err == nil {
		t.Error("negative buffer accepted")
	}
}

// fakeCluster answers the first n produce requests with code, then produces normally.
func fakeCluster(t *testing.T, code int16, n int) *Sink {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if n == 0 {
			return nil, nil, false // let the fake cluster produce
		}
		n--
		c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	s, err := New(Config{Brokers: c.ListenAddrs(), Opts: []kgo.Opt{kgo.MetadataMinAge(50 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func produceOne(t *testing.T, s *Sink) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	s.Produce(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatal("no promise within 20s")
		return nil
	}
}

// A broker that answers MESSAGE_TOO_LARGE fails the record with an error Rejected
// recognises, so the relay dead-letters it instead of stalling.
func TestMessageTooLargeIsRejectedForGood(t *testing.T) {
	s := fakeCluster(t, kerr.MessageTooLarge.Code, 1000)
	if err := produceOne(t, s); !Rejected(err) {
		t.Fatalf("got %v, want an error Rejected recognises", err)
	}
}

// A retriable error (NOT_LEADER) is retried inside the client until it succeeds: no
// per-record budget is spent and the promise sees success.
func TestNotLeaderIsRetriedToSuccess(t *testing.T) {
	s := fakeCluster(t, kerr.NotLeaderForPartition.Code, 3)
	if err := produceOne(t, s); err != nil {
		t.Fatalf("got %v, want success after retries", err)
	}
}

func TestPingNamesTheBrokers(t *testing.T) {
	s, err := New(Config{Brokers: []string{"127.0.0.1:1"}, DialTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = s.Ping(ctx)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
	if want := "127.0.0.1:1"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
}
