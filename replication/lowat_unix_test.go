//go:build unix

package replication

import (
	"encoding/binary"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// TestReaderRaisesAndLowersRcvLowat feeds the reader XLogData Begins sent at several lags
// after their commit and checks the socket option itself on a real TCP socket, and that
// Config.OnDrain hears each change of mode once.
func TestReaderRaisesAndLowersRcvLowat(t *testing.T) {
	c, _ := loopbackPair(t)
	var told []bool
	r := &reader{tcp: c, onDrain: func(draining bool) { told = append(told, draining) }}
	r.frontend(c, c)
	lowat := func() int {
		rc, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var v int
		if cerr := rc.Control(func(fd uintptr) { v, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT) }); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	committed := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// msg is an XLogData of kind ('B' a Begin) sent lag after its transaction's commit.
	msg := func(kind byte, lag time.Duration) pglogrepl.XLogData {
		pgMicros := committed.UnixMicro() - 946684800*1e6 // PostgreSQL's epoch is 2000-01-01
		b := binary.BigEndian.AppendUint64([]byte{kind}, 0x200)
		b = binary.BigEndian.AppendUint64(b, uint64(pgMicros))
		return pglogrepl.XLogData{ServerTime: committed.Add(lag), WALData: binary.BigEndian.AppendUint32(b, 7)}
	}
	r.xlogData(msg('B', 5*time.Millisecond)) // between the thresholds: no change
	if r.lowat || lowat() != 1 {
		t.Fatalf("raised at a 5ms lag (lowat %d)", lowat())
	}
	r.xlogData(msg('I', time.Second))
	if r.lowat || lowat() != 1 {
		t.Fatalf("an Insert read as a Begin (lowat %d)", lowat())
	}
	r.xlogData(pglogrepl.XLogData{ServerTime: committed.Add(time.Second), WALData: msg('B', 0).WALData[:12]})
	if r.lowat || lowat() != 1 {
		t.Fatalf("a truncated Begin read (lowat %d)", lowat())
	}
	r.xlogData(msg('B', time.Second))
	if !r.lowat || lowat() != drainLowat {
		t.Fatalf("behind by 1s: lowat %d, want %d", lowat(), drainLowat)
	}
	r.xlogData(msg('B', 5*time.Millisecond))
	if !r.lowat {
		t.Fatal("lowered between the thresholds")
	}
	r.xlogData(msg('B', time.Millisecond))
	if r.lowat || lowat() != 1 {
		t.Fatalf("caught up: lowat %d, want 1", lowat())
	}

	// A drain of large rows reads in larger pieces, and in the usual ones again once the rows
	// are small; caught up, every read is the usual size.
	insert := func(n int) pglogrepl.XLogData { return pglogrepl.XLogData{WALData: make([]byte, n)} }
	r.xlogData(msg('B', time.Second))
	if !r.lowat || r.large || lowat() != drainLowat || r.br.max != readSize {
		t.Fatalf("small rows: lowat %d, read size %d; want %d, %d", lowat(), r.br.max, drainLowat, readSize)
	}
	for range 20 { // Begin, Insert of 10 KB, Commit
		r.xlogData(msg('B', time.Second))
		r.xlogData(insert(10 << 10))
		r.xlogData(insert(26))
	}
	if !r.large || lowat() != drainLowatLarge || r.br.max != readSizeLarge {
		t.Fatalf("10 KB rows: lowat %d, read size %d; want %d, %d", lowat(), r.br.max, drainLowatLarge, readSizeLarge)
	}
	for range 40 { // Begin, Insert of 200 bytes, Commit
		r.xlogData(msg('B', time.Second))
		r.xlogData(insert(200))
		r.xlogData(insert(26))
	}
	if !r.lowat || r.large || lowat() != drainLowat || r.br.max != readSize {
		t.Fatalf("small rows again: lowat %d, read size %d; want %d, %d", lowat(), r.br.max, drainLowat, readSize)
	}
	for range 20 {
		r.xlogData(msg('B', time.Second))
		r.xlogData(insert(10 << 10))
	}
	r.xlogData(msg('B', time.Millisecond))
	if r.lowat || r.large || lowat() != 1 || r.br.max != readSize {
		t.Fatalf("caught up after large rows: lowat %d, read size %d; want 1, %d", lowat(), r.br.max, readSize)
	}
	if want := []bool{true, false, true, false}; !slices.Equal(told, want) {
		t.Errorf("OnDrain heard %v, want %v", told, want)
	}
}
