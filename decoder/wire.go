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
	if len(r.buf) < 2 {
		r.bad = true
		r.buf = nil
		return 0
	}
	v := binary.BigEndian.Uint16(r.buf)
	r.buf = r.buf[2:]
	return v
}

func (r *reader) u32() uint32 {
	if len(r.buf) < 4 {
		r.bad = true
		r.buf = nil
		return 0
	}
	v := binary.BigEndian.Uint32(r.buf)
	r.buf = r.buf[4:]
	return v
}

func (r *reader) u64() uint64 {
	if len(r.buf) < 8 {
		r.bad = true
		r.buf = nil
		return 0
	}
	v := binary.BigEndian.Uint64(r.buf)
	r.buf = r.buf[8:]
	return v
}

// bytes returns the next n bytes, aliasing the buffer.
func (r *reader) bytes(n uint32) []byte {
	if uint64(n) > uint64(len(r.buf)) {
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
