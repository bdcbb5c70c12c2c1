package roles

import (
	"strings"
	"sync"
)

// tailBytes is how much of a child's output a Tail keeps.
const tailBytes = 4 << 10

// Tail keeps the last few KiB a child process wrote (its standard
// error, say), where a child says why it exits, for the parent to quote
// when the child fails. Its zero value is ready; it may be written and
// read at once.
type Tail struct {
	mu  sync.Mutex
	buf []byte
}

// Write keeps the last 4 KiB of everything written.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBytes {
		t.buf = t.buf[len(t.buf)-tailBytes:]
	}
	return len(p), nil
}

// String is everything kept, without surrounding space.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// LastLine is the last line kept that is not blank, without surrounding
// space: the line that explains, not the whole tail run together.
func (t *Tail) LastLine() string {
	kept := t.String()
	return strings.TrimSpace(kept[strings.LastIndexByte(kept, '\n')+1:])
}
