package sqlite_test

import "errors"

// mkfifo fails: Windows has no FIFO in the file system.
func mkfifo(string) error { return errors.ErrUnsupported }
