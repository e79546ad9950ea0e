package proc

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writes and reads: a child process's output (or
// a logger's) that a test reads while the writer still runs. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (n int, err error) {
	s.mu.Lock()
	n, err = s.b.Write(p)
	s.mu.Unlock()
	return n, err
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	out := s.b.String()
	s.mu.Unlock()
	return out
}
