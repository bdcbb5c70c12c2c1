package worker

import (
	"bufio"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"leases/evidence/backend"
)

// fullAfter accepts n writes, then fails every later one as a full disk
// would.
type fullAfter struct{ n int }

func (f *fullAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, syscall.ENOSPC
	}
	f.n--
	return len(p), nil
}

// A worker that cannot write its reply exits 1 and says why as its last
// line on stderr; the controller quotes that line, not the whole tail.
func TestWorkerSaysWhyItExits(t *testing.T) {
	var stderr strings.Builder
	in := bufio.NewReader(strings.NewReader(`{"op":"read","resource":"r","receiver":"fenced"}` + "\n"))
	drivers := []backend.Driver{backend.SQLite{}}
	code, _ := run(context.Background(), drivers, "sqlite", filepath.Join(t.TempDir(), "w.db"), in, &fullAfter{n: 1}, &stderr)
	if code != 1 || stderr.String() != "writing a reply: no space left on device\n" {
		t.Fatalf("exit %d, stderr %q; want 1 and the reason", code, stderr.String())
	}

	var tail tailBuffer
	_, _ = tail.Write([]byte("an earlier line\n" + stderr.String() + "\n  \n"))
	if got, want := tail.saying(), "; it said: writing a reply: no space left on device"; got != want {
		t.Fatalf("quoted %q, want %q", got, want)
	}
	var silent tailBuffer
	if got := silent.saying(); got != "" {
		t.Fatalf("a silent worker quoted as %q", got)
	}
	if _, err := serve(context.Background(), drivers, "sqlite", filepath.Join(t.TempDir(), "w.db"), bufio.NewReader(strings.NewReader("{}\n")), &fullAfter{n: 0}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatal("a failed announcement is not reported with its cause")
	}
}
