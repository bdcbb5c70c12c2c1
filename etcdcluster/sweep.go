package etcdcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// A cluster's data lives in a directory of its own, <Dir>/leases-etcd-cluster-*,
// next to a lock file of the same name with ".lock" added, which the
// cluster's process holds locked from before the directory exists until
// after it is removed. The kernel releases the lock when the process
// dies, however it dies, so a directory whose lock file nobody holds is
// what a killed run left: Start removes every such one under its Dir
// before it makes its own.

// dirPattern names cluster directories; lockSuffix their lock files.
const (
	dirPattern = "leases-etcd-cluster-*"
	lockSuffix = ".lock"
)

// held are the lock files this process holds: another cluster of this
// process must not even try them, since some platforms' locks do not
// stop a second try from the same process.
var held sync.Map // path -> true

// makeDir makes a fresh cluster directory under parent, holding its lock,
// after sweeping what killed runs left there. unlock releases the lock
// and removes the lock file; call it after the directory is removed.
func makeDir(parent string) (dir string, unlock func() error, err error) {
	if parent == "" {
		parent = os.TempDir()
	}
	if _, err := Sweep(parent); err != nil {
		return "", nil, err
	}
	lockFile, err := os.CreateTemp(parent, strings.TrimSuffix(dirPattern, "*")+"*"+lockSuffix)
	if err != nil {
		return "", nil, fmt.Errorf("etcdcluster: lock file: %w", err)
	}
	lockPath := lockFile.Name()
	held.Store(lockPath, true)
	release := func() error {
		held.Delete(lockPath)
		return errors.Join(lockFile.Close(), os.Remove(lockPath))
	}
	if ok, err := tryLock(lockFile); err != nil || !ok {
		return "", nil, errors.Join(fmt.Errorf("etcdcluster: lock %s: locked %v, %w", lockPath, ok, err), release())
	}
	dir = strings.TrimSuffix(lockPath, lockSuffix)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", nil, errors.Join(fmt.Errorf("etcdcluster: %w", err), release())
	}
	return dir, release, nil
}

// Sweep removes, under parent, every cluster directory (and its lock
// file) whose lock no live process holds: what a run that was killed
// left behind. It returns what it removed.
func Sweep(parent string) (removed []string, err error) {
	locks, err := filepath.Glob(filepath.Join(parent, dirPattern+lockSuffix))
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, lockPath := range locks {
		if _, ours := held.Load(lockPath); ours {
			continue
		}
		gone, err := sweepOne(lockPath)
		if gone {
			removed = append(removed, strings.TrimSuffix(lockPath, lockSuffix))
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("etcdcluster: sweep %s: %w", parent, err)
	}
	return removed, nil
}

// sweepOne removes the cluster directory of lockPath and the lock file if
// it can take the lock: its run is gone.
func sweepOne(lockPath string) (removed bool, err error) {
	f, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // its run ended meanwhile, and removed it
	}
	if err != nil {
		return false, err
	}
	ok, err := tryLock(f)
	if err != nil || !ok {
		return false, errors.Join(err, f.Close()) // a live run holds it
	}
	err = os.RemoveAll(strings.TrimSuffix(lockPath, lockSuffix))
	// The lock goes last, so that nobody takes the directory's name
	// while it is being removed.
	return err == nil, errors.Join(err, f.Close(), os.Remove(lockPath))
}
