//go:build unix

package commandtest

import (
	"bufio"
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
)

// FIFO makes a FIFO at path and returns it opened for reading, once a
// CMD (fifo-holder, or one of the test's own) has opened it for writing:
// it reaches its end when every process that holds it is gone, a moment
// after the last one's exit. Its reads, and the wait for the open, are
// bounded by ctx; the test's cleanup closes it.
func FIFO(t *testing.T, ctx context.Context, path string, started func()) *bufio.Reader {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	started()
	opened := make(chan *os.File, 1)
	go func() {
		f, err := os.Open(path)
		if err != nil {
			t.Error(err)
		}
		opened <- f
	}()
	select {
	case f := <-opened:
		if f == nil {
			t.FailNow()
		}
		t.Cleanup(func() { _ = f.Close() })
		if deadline, ok := ctx.Deadline(); ok {
			if err := f.SetReadDeadline(deadline); err != nil && !errors.Is(err, os.ErrNoDeadline) {
				t.Fatal(err)
			}
		}
		return bufio.NewReader(f)
	case <-ctx.Done():
		// Unblock the open with a writer of our own, then fail.
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
		t.Fatalf("nothing opened the FIFO for writing: %v", context.Cause(ctx))
		return nil
	}
}
