package sqlitestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"leases"
)

// memory is the path of a database that lives in the store's connection.
const memory = ":memory:"

// checkPath refuses, before anything is created, a path SQLite would read
// as something else, and a file this process cannot use as a database.
func checkPath(path string) error {
	switch {
	case path == "":
		return fmt.Errorf("%w: database path is empty", leases.ErrInvalidInput)
	case path == memory:
		return nil
	case strings.ContainsAny(path, "?\x00"):
		// The driver splits the DSN at the first '?', so such a path
		// would be read as options; refuse it rather than open some
		// other file.
		return fmt.Errorf("%w: database path %q contains '?' or NUL", leases.ErrInvalidInput, path)
	case strings.HasPrefix(path, "file:"):
		// SQLite reads it as a URI: "file:/dir/u.db" would create a file
		// and then fail to find it under the name the checks use.
		return fmt.Errorf("%w: database path %q is a URI; give a file path", leases.ErrInvalidInput, path)
	}
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // SQLite creates it
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file (%v)", leases.ErrInvalidInput, path, info.Mode().Type())
	}
	// SQLite would quietly open an unwritable file read-only, and the
	// store would fail only at its first write.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: the database file is not writable: %w", path, err)
	}
	return f.Close()
}

// openedFile is one of the database's files as the store opened it.
type openedFile struct {
	path string
	info os.FileInfo
}

// identify records the database file, its write-ahead log and its shared
// memory index as they are now, by absolute path (so that a later change
// of working directory is not taken for a moved file). In WAL mode SQLite
// keeps writing to files that were deleted or replaced: through the old
// log and index this process would grant and accept what no other process
// sees, and a process that opens the path afresh would start epochs from
// 1 again. While the store is open, SQLite itself never deletes the log or
// the index (only the last connection to close does), so any change to
// them is someone else's doing.
func identify(path string) ([]openedFile, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	var files []openedFile
	for _, p := range []string{abs, abs + "-wal", abs + "-shm"} {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		files = append(files, openedFile{path: p, info: info})
	}
	return files, nil
}

// checkFiles fails with ErrDatabaseMoved when a path no longer names the
// file this store opened. It runs inside every transaction, under the
// write lock; it cannot see a change made between it and the commit.
func (s *Store) checkFiles() error {
	for _, f := range s.files {
		now, err := os.Stat(f.path)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrDatabaseMoved, f.path, err)
		}
		if !os.SameFile(now, f.info) {
			return fmt.Errorf("%w: %s is another file now", ErrDatabaseMoved, f.path)
		}
	}
	return nil
}
