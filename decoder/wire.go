package decoder

import (
	"encoding/binary"
	"time"
)

// reader reads big-endian pgoutput fields. Reading past the end sets bad and yields zero values,
// so a parser reads all its fields and checks once.
type reader struct {
	buf []byte
	bad bool
}

func (r *reader) u8() byte {
	if len(r.buf) < 1 {
		r.bad = true
		return 0
	}
	v := r.buf[0]
	r.buf = r.buf[1:]
	return v
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// bytes returns the next n bytes, aliasing the buffer.
func (r *reader) bytes(n uint32) []byte {
	if uint64(n) > uint64(len(r.buf)) {
		r.bad = true
		r.buf = nil
		return nil
	}
	return r.take(int(n))
}

// take returns the next n bytes, aliasing the buffer, or nil (and sets bad) if fewer are left.
func (r *reader) take(n int) []byte {
	if len(r.buf) < n {
		r.bad = true
		r.buf = nil
		return nil
	}
	v := r.buf[:n:n]
	r.buf = r.buf[n:]
	return v
}

// cstring returns a NUL-terminated string without its NUL, aliasing the buffer.
func (r *reader) cstring() []byte {
	for i, c := range r.buf {
		if c == 0 {
			v := r.buf[:i:i]
			r.buf = r.buf[i+1:]
			return v
		}
	}
	r.bad = true
	r.buf = nil
	return nil
}

// time reads a pgoutput timestamp: microseconds since 2000-01-01 00:00:00 UTC.
func (r *reader) time() time.Time {
	return pgTime(int64(r.u64()))
}

// done reports whether every field was present and nothing is left over.
func (r *reader) done() bool { return !r.bad && len(r.buf) == 0 }

// unixToY2K is the number of seconds from the Unix epoch to the PostgreSQL epoch.
const unixToY2K = 946684800

// pgTime converts a PostgreSQL timestamp to UTC, as pglogrepl does but without overflowing
// for far-away values.
func pgTime(us int64) time.Time {
	return time.Unix(us/1e6+unixToY2K, (us%1e6)*1e3).UTC()
}
