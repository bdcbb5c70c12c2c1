package sqlite_test

// The database's files changed under an open store: deleted or replaced.
// Not among the contract's 17 tests.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"leases"
	"leases/evidence/backend"
	"leases/evidence/experimenttest"
	"leases/sqlite"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// Deleting or replacing the write-ahead log or its index while a store is
// open: SQLite would go on granting through the old, unlinked files, and a
// new process would start from the main file alone (with no tables, epoch
// 1 again). The holding process must fail on its next operation, naming
// the file, and change nothing.
func TestLogDeletedOrReplacedUnderAnOpenStore(t *testing.T) {
	replace := func(t *testing.T, path string) {
		t.Helper()
		other := path + ".other"
		if err := os.WriteFile(other, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(other, path); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(t *testing.T, path string) {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		change func(t *testing.T, db string)
		naming string // the file the error must name
	}{
		{"-wal deleted", func(t *testing.T, db string) { remove(t, db+"-wal") }, "-wal"},
		{"-shm deleted", func(t *testing.T, db string) { remove(t, db+"-shm") }, "-shm"},
		{"-wal and -shm deleted", func(t *testing.T, db string) { remove(t, db+"-wal"); remove(t, db+"-shm") }, "-wal"},
		{"-wal replaced", func(t *testing.T, db string) { replace(t, db+"-wal") }, "-wal"},
		{"main file replaced", func(t *testing.T, db string) { replace(t, db) }, "leases.db "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testctx.Context(t)
			path := sqlitetest.Path(t)
			holder := experimenttest.StartWorker(t, ctx, "A", path)
			lease, err := holder.Acquire(ctx, "r", 0, 3)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := holder.Write(ctx, leases.Fenced, "r", lease.Epoch, "v1"); err != nil {
				t.Fatal(err)
			}
			tc.change(t, path)
			for name, op := range map[string]func() error{
				"acquire": func() error { _, err := holder.Acquire(ctx, "r", 3, 3); return err },
				"write":   func() error { _, err := holder.Write(ctx, leases.Fenced, "r", 2, "v2"); return err },
				"renew":   func() error { _, err := holder.Renew(ctx, lease, 1, 3); return err },
				"read":    func() error { _, _, err := holder.Read(ctx, backend.Fenced, "r"); return err },
			} {
				err := op()
				if err == nil || !strings.Contains(err.Error(), sqlite.ErrDatabaseMoved.Error()) || !strings.Contains(err.Error(), tc.naming) {
					t.Errorf("%s after the change: %v; want %q naming %q", name, err, sqlite.ErrDatabaseMoved, tc.naming)
				}
			}
		})
	}
}

// A path SQLite would read as something other than a file, or a file that
// is not a regular one, is refused before anything is created.
func TestOpenRefusesWhatIsNotADatabaseFile(t *testing.T) {
	dir := t.TempDir()
	paths := []string{
		"file:" + dir + "/u.db",
		"file::memory:",
		dir + "/q?mode=ro",
		dir,
	}
	fifo := dir + "/fifo"
	switch err := mkfifo(fifo); {
	case err == nil:
		paths = append(paths, fifo)
	case !errors.Is(err, errors.ErrUnsupported): // Windows has no FIFO to try
		t.Fatal(err)
	}
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			before := listDir(t, dir)
			_, err := sqlite.Open(context.Background(), path)
			if !errors.Is(err, leases.ErrInvalidInput) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("open %q: %v; want one line matching ErrInvalidInput", path, err)
			}
			if after := listDir(t, dir); after != before {
				t.Fatalf("the refused open created files: %s became %s", before, after)
			}
		})
	}
}

func listDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, ",")
}

// A file that cannot be made says why, in one line that matches the
// operating system's error, and creates nothing: its directory missing,
// a file where its directory should be, a directory where the file should
// be (shown with its mode, not as d---------), a directory this process
// may not write. Not SQLite's "unable to open database file (14)".
func TestOpenSaysWhyTheFileCannotBeMade(t *testing.T) {
	dir := t.TempDir()
	notADir := filepath.Join(dir, "plain")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	aDir := filepath.Join(dir, "a-directory")
	if err := os.Mkdir(aDir, 0o755); err != nil {
		t.Fatal(err)
	}
	mode := func(path string) string {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return info.Mode().String()
	}
	cases := []struct {
		name, path string
		is         error
		says       string
	}{
		{"no such directory", filepath.Join(dir, "missing", "leases.db"), fs.ErrNotExist,
			"open " + filepath.Join(dir, "missing", "leases.db") + ": no such directory " + filepath.Join(dir, "missing")},
		{"a file for a directory", filepath.Join(notADir, "leases.db"), leases.ErrInvalidInput,
			notADir + " is not a directory (" + mode(notADir) + ")"},
		{"a directory for the file", aDir, leases.ErrInvalidInput, aDir + " is not a regular file (" + mode(aDir) + ")"},
	}
	if runtime.GOOS != "windows" && os.Getuid() != 0 {
		locked := filepath.Join(dir, "locked")
		if err := os.Mkdir(locked, 0o500); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			name, path string
			is         error
			says       string
		}{"a directory it may not write", filepath.Join(locked, "leases.db"), fs.ErrPermission,
			"permission denied: this process may not create a file in " + locked})
	} else {
		t.Log("no unwritable directory as root or on Windows: cmd/leases's TestMessages makes one with strace")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := listDir(t, dir)
			_, err := sqlite.Open(context.Background(), tc.path)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") ||
				strings.Contains(err.Error(), "unable to open database file") {
				t.Fatalf("open %s: %v; want one line matching %v and saying %q", tc.path, err, tc.is, tc.says)
			}
			if after := listDir(t, dir); after != before {
				t.Fatalf("the failed open created files: %s became %s", before, after)
			}
		})
	}
}
