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
// as something else, and a file this process cannot use as a database;
// where there is no file, it creates an empty one (which SQLite takes for
// an empty database), so that the error says why a file cannot be made
// there (no such directory, permission denied) rather than SQLite's
// "unable to open database file".
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
		return create(path)
	}
	if err != nil {
		if dirErr := checkDir(path); dirErr != nil {
			return dirErr
		}
		return fmt.Errorf("open %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file (%v)", leases.ErrInvalidInput, path, info.Mode())
	}
	// SQLite would quietly open an unwritable file read-only, and the
	// store would fail only at its first write.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: the database file is not writable: %w", path, err)
	}
	return f.Close()
}

// create makes an empty database file at path, where there was none, or
// says why it cannot: the error then matches the operating system's
// (fs.ErrNotExist, fs.ErrPermission), or ErrInvalidInput where the
// directory is not one. Another process that creates the file first wins;
// it is then checked as any file that was there.
func create(path string) error {
	if err := checkDir(path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	switch {
	case errors.Is(err, os.ErrExist):
		return checkPath(path)
	case errors.Is(err, os.ErrPermission):
		return &fileError{fmt.Sprintf("open %s: permission denied: this process may not create a file in %s", path, filepath.Dir(path)), err}
	case err != nil:
		return fmt.Errorf("open %s: %w", path, err)
	}
	return f.Close()
}

// checkDir says what is wrong with path's directory, if anything is: it
// does not exist, or it is not a directory.
func checkDir(path string) error {
	dir := filepath.Dir(path)
	switch info, err := os.Stat(dir); {
	case errors.Is(err, os.ErrNotExist):
		return &fileError{fmt.Sprintf("open %s: no such directory %s", path, dir), err}
	case err == nil && !info.IsDir():
		return fmt.Errorf("%w: open %s: %s is not a directory (%v)", leases.ErrInvalidInput, path, dir, info.Mode())
	}
	return nil
}

// fileError is why a database file cannot be made, in words of its own,
// matching the operating system's error.
type fileError struct {
	msg string
	err error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.err }

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
