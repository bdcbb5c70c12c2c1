package sqlite_test

import (
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// makeImmutable makes path unwritable even for root, with the file
// system's immutable flag (as chattr +i sets it), or skips t where the
// file system has no such flag; the flag is taken off when t ends.
func makeImmutable(t *testing.T, path string) {
	t.Helper()
	const fsIocGetFlags, fsIocSetFlags, fsImmutable = 0x80086601, 0x40086602, 0x10
	flags := func(request uintptr, value *int32) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), request, uintptr(unsafe.Pointer(value))); errno != 0 {
			return errno
		}
		return nil
	}
	var original int32
	if err := flags(fsIocGetFlags, &original); err != nil {
		t.Skipf("cannot make %s read-only for root here (no file flags: %v)", path, err)
	}
	// Keep the flags the file system set (ext4 refuses to drop "extents").
	immutable := original | fsImmutable
	if err := flags(fsIocSetFlags, &immutable); err != nil {
		t.Skipf("cannot make %s read-only for root here (the file system refuses the immutable flag: %v)", path, err)
	}
	t.Cleanup(func() { _ = flags(fsIocSetFlags, &original) }) // or t.TempDir cannot remove it
}
