package command

import (
	"syscall"
	"testing"
)

// readOnlyFileSystem mounts an empty read-only tmpfs on dir for the test's
// duration, or skips t where mounting is not permitted.
func readOnlyFileSystem(t *testing.T, dir string) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, "size=64k"); err != nil {
		t.Skipf("skipped: root writes anywhere, and no read-only tmpfs can be mounted here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}
