package replication

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/cdc-relay/cdc-relay/testkit/simwal"
)

// caughtUpReader is a reader on a real TCP socket over loopback, caught up (no SO_RCVLOWAT),
// whose server end the test writes raw protocol messages to: the read path without a
// walsender's handshake.
func caughtUpReader(t testing.TB) (*reader, *net.TCPConn) {
	t.Helper()
	c, s := loopbackPair(t)
	cfg, err := pgconn.ParseConfig("postgres://test@127.0.0.1/test")
	if err != nil {
		t.Fatal(err)
	}
	r := &reader{}
	cfg.BuildFrontend = r.frontend
	conn, err := pgconn.Construct(&pgconn.HijackedConn{Conn: c, Config: cfg, ParameterStatuses: map[string]string{}, TxStatus: 'I'})
	if err != nil {
		t.Fatal(err)
	}
	r.start(conn)
	return r, s
}

// copyData is a CopyData message of n payload bytes, as the walsender frames an XLogData.
func copyData(t testing.TB, n int) []byte {
	t.Helper()
	b, err := (&pgproto3.CopyData{Data: make([]byte, n)}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func send(t testing.TB, s net.Conn, b []byte) {
	t.Helper()
	if _, err := s.Write(b); err != nil {
		t.Fatal(err)
	}
}

// receiveWithin runs r.receive(ctx, dl) and fails the test if it has not returned within max.
func receiveWithin(t *testing.T, r *reader, ctx context.Context, dl time.Time, max time.Duration) (pgproto3.BackendMessage, error) {
	t.Helper()
	type result struct {
		msg pgproto3.BackendMessage
		err error
	}
	done := make(chan result, 1)
	go func() {
		msg, err := r.receive(ctx, dl)
		done <- result{msg, err}
	}()
	select {
	case res := <-done:
		return res.msg, res.err
	case <-time.After(max):
		t.Fatalf("receive did not return within %v", max)
		return nil, nil
	}
}

// A caught-up read still ends at its deadline (the next status update, the receive timeout),
// although it has no context of its own.
func TestCaughtUpReadEndsAtItsDeadline(t *testing.T) {
	r, s := caughtUpReader(t)
	start := time.Now()
	msg, err := receiveWithin(t, r, context.Background(), start.Add(50*time.Millisecond), 30*time.Second)
	if msg != nil || err != nil {
		t.Fatalf("nothing sent: got %T, %v; want a timed-out read (nil, nil)", msg, err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("returned after %v, before its deadline", waited)
	}
	// The bound cleared its deadline: the next read waits for the message and gets it.
	send(t, s, copyData(t, 10))
	msg, err = receiveWithin(t, r, context.Background(), time.Now().Add(time.Hour), 30*time.Second)
	if _, ok := msg.(*pgproto3.CopyData); !ok || err != nil {
		t.Fatalf("after a timed-out read: got %T, %v; want the CopyData", msg, err)
	}
}

// Shutdown ends a caught-up read at once, not at its deadline an hour away.
func TestCaughtUpReadEndsWhenTheContextEnds(t *testing.T) {
	r, _ := caughtUpReader(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := receiveWithin(t, r, ctx, time.Now().Add(time.Hour), 30*time.Second); err == nil {
		t.Fatal("a read ended by its context returned no error")
	}
	if _, err := r.receive(ctx, time.Now().Add(time.Hour)); err == nil {
		t.Fatal("a read with an ended context started")
	}
}

// A wake (Stream.wake) moves the read deadline into the past, perhaps just before a read
// starts: the read must end at once, so the reader may never set a deadline of its own on the
// socket (it would replace the wake's, and the confirmed position would wait for the next
// message or status update).
func TestCaughtUpReadKeepsAWakesDeadline(t *testing.T) {
	r, _ := caughtUpReader(t)
	if err := r.conn.Conn().SetReadDeadline(time.Unix(1, 0)); err != nil { // as Stream.wake does
		t.Fatal(err)
	}
	msg, err := receiveWithin(t, r, context.Background(), time.Now().Add(time.Hour), 5*time.Second)
	if msg != nil || err != nil {
		t.Fatalf("woken read: got %T, %v; want a timed-out read (nil, nil)", msg, err)
	}
}

// The bound touches the socket only during a read: its timer or the stream's context ending
// between reads must leave the connection alone, or Close's end of the COPY (which waits for the
// server's answer under deadlines of its own) and the next session's handshake would fail.
func TestReadBoundLeavesTheSocketAloneBetweenReads(t *testing.T) {
	r, s := caughtUpReader(t)
	send(t, s, copyData(t, 10))
	if msg, err := receiveWithin(t, r, context.Background(), time.Now().Add(time.Hour), 30*time.Second); msg == nil || err != nil {
		t.Fatalf("got %T, %v; want the CopyData", msg, err)
	}
	r.bound.trip() // the timer or the context, after the read
	send(t, s, copyData(t, 10))
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.conn.ReceiveMessage(rctx); err != nil {
		t.Fatalf("a read after the bound tripped between reads: %v", err)
	}
}

// TestCaughtUpReadAllocatesNothing pins the caught-up read path's cost: at 2,000 rows/s every
// message is a read, and a context made, watched and canceled per read was 11 allocations
// (912 bytes) a read.
func TestCaughtUpReadAllocatesNothing(t *testing.T) {
	if allocs := testing.AllocsPerRun(200, oneRead(t)); allocs > 0 {
		t.Errorf("a caught-up read: %v allocations, want 0", allocs)
	}
}

// oneRead returns a function that writes a 100-byte CopyData to a caught-up reader's socket
// and reads it as the stream does, with the same deadline for every read (the next status
// update, as between two status updates).
func oneRead(t testing.TB) func() {
	r, s := caughtUpReader(t)
	m := copyData(t, 100)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dl := time.Now().Add(time.Hour)
	return func() {
		send(t, s, m)
		if msg, err := r.receive(ctx, dl); msg == nil || err != nil {
			t.Fatalf("got %T, %v; want the CopyData", msg, err)
		}
	}
}

// pgconn reuses its read buffers (DESIGN.md, "pgconn reuses its read buffer"): a message's Data
// that aliased them would be overwritten by the reads after it, while the pipeline still holds
// it (its record's value until Kafka acknowledges). Rows of 10 KB (read through pgproto3's
// pooled large buffers) and of a few bytes (its 8 KB buffer) are all held until the last one
// arrived, then compared with what was committed.
func TestSimStreamMessagesOutliveTheReadBuffer(t *testing.T) {
	srv, s := simStream(t, Config{})
	rel := simwal.OutboxRelation(16384)
	payload := func(i int) string { // distinct per row: a copy shared by two rows shows
		n := 10 << 10
		if i%3 == 1 {
			n = 8
		}
		return strings.Repeat(string(rune('a'+i%26)), n) + strconv.Itoa(i)
	}
	const rows = 60
	for i := range rows {
		srv.Commit(64, []simwal.Change{{Rel: rel, Values: []simwal.Value{
			simwal.Text(strconv.Itoa(i)), simwal.Text("k"), simwal.Text("t"), simwal.Text(payload(i)), nil, nil}}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan []Message, 4*rows)
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx, ch) }()
	got := collect(t, ch, 3*rows+1, map[Kind]int{}) // Begin, Insert, Commit each, one Relation
	i := 0
	for _, m := range got {
		if m.Kind != KindData || m.Data[0] != 'I' {
			continue
		}
		if want := payload(i); !bytes.Contains(m.Data, []byte(want)) {
			t.Errorf("Insert %d no longer holds its payload (%.20q...): its Data was overwritten by a later read", i, want)
		}
		i++
	}
	if i != rows {
		t.Errorf("%d Inserts, want %d", i, rows)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// readBuffer reads from the socket in pieces of its current size at most, hands out what it
// holds before reading again, and lets a read that can take a whole piece go to the socket.
func TestReadBufferReadsInPiecesOfItsSize(t *testing.T) {
	src := &countingReader{data: bytes.Repeat([]byte("0123456789"), 100)}
	b := &readBuffer{rd: src, buf: make([]byte, 64), max: 16}
	var got []byte
	read := func(n int) int {
		p := make([]byte, n)
		n, err := b.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p[:n]...)
		return n
	}
	for len(got) < 48 {
		read(5)
	}
	if src.largest != 16 || len(got) != 48 {
		t.Fatalf("pieces of 16: largest read %d, %d bytes returned", src.largest, len(got))
	}
	b.max = 64
	read(10)
	if src.largest != 64 || b.Buffered() != 54 {
		t.Fatalf("pieces of 64: largest read %d (want 64), %d buffered (want 54)", src.largest, b.Buffered())
	}
	if n := read(100); n != 54 || b.Buffered() != 0 {
		t.Fatalf("a read returned %d bytes with %d buffered; want what was held first, 54", n, b.Buffered())
	}
	if n := read(100); n != 100 || b.Buffered() != 0 {
		t.Fatalf("a read larger than a piece: %d bytes, %d buffered; want 100 straight from the socket, 0", n, b.Buffered())
	}
	if string(got) != string(src.data[:len(got)]) {
		t.Fatalf("bytes out of order: %q", got)
	}
}

// A connection's handshake reads straight into pgproto3's buffer and makes none of its own: a
// standby asks for a held slot every StandbyRetry and a relay retries a server that is down, and
// neither streams. The buffer is made at the stream's first read, at the read size then, and
// grows when a drain of large messages raises it.
func TestReadBufferIsMadeWhenTheStreamStarts(t *testing.T) {
	src := &countingReader{data: bytes.Repeat([]byte("0123456789"), 100_000)}
	r := &reader{}
	r.frontend(src, io.Discard)
	b := r.br
	p := make([]byte, 100)
	if n, err := b.Read(p); err != nil || n != 100 || src.largest != 100 || b.buf != nil || b.Buffered() != 0 {
		t.Fatalf("handshake read: %d bytes (%v), largest read %d, buffer of %d bytes, %d buffered; want 100 straight from the socket and no buffer",
			n, err, src.largest, len(b.buf), b.Buffered())
	}
	r.streaming()
	if n, err := b.Read(p); err != nil || n != 100 || src.largest != readSize || len(b.buf) != readSize {
		t.Fatalf("first stream read: %d bytes (%v), largest read %d, buffer of %d bytes; want a read of %d into a buffer that size",
			n, err, src.largest, len(b.buf), readSize)
	}
	b.max = readSizeLarge
	for b.Buffered() > 0 {
		if _, err := b.Read(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Read(p); err != nil || src.largest != readSizeLarge || len(b.buf) != readSizeLarge {
		t.Fatalf("a large drain's read: largest read %d, buffer of %d bytes (%v); want %d", src.largest, len(b.buf), err, readSizeLarge)
	}
}

// countingReader returns data in reads as large as asked, and remembers the largest.
type countingReader struct {
	data    []byte
	off     int
	largest int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.largest = max(c.largest, len(p))
	n := copy(p, c.data[c.off:])
	c.off += n
	return n, nil
}
