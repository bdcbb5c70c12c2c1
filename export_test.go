package leases

import (
	"context"
	"time"
)

// OpenWithBusyTimeout is Open with another busy timeout; a zero timeout
// makes a contending transaction fail at once instead of waiting, which
// lets a test see, without sleeping, that another transaction is open.
func OpenWithBusyTimeout(ctx context.Context, path string, busyTimeout time.Duration) (*Store, error) {
	return open(ctx, path, busyTimeout)
}

// SetHookInsideTransaction installs hook until the test ends.
func SetHookInsideTransaction(hook func(operation string)) (restore func()) {
	testHookInsideTransaction = hook
	return func() { testHookInsideTransaction = nil }
}
