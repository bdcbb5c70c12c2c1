package outcome

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"leases"
)

// Each error an operation returns matches what stopped it: the context's
// error and its cause whatever the driver said, a refusal stays a
// refusal, and an unknown outcome says so.
func TestErrorsMatchTheirCause(t *testing.T) {
	sessionEnded := errors.New("session ended")
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	ended, end := context.WithCancelCause(live)
	end(sessionEnded)
	driverFailed := errors.New("connection reset")
	for _, c := range []struct {
		name     string
		ctx      context.Context
		err      error
		wrap     func(context.Context, error) error
		want     []error
		wantNot  []error
		wantSame bool
	}{
		{"live context: the error as it is", live, driverFailed, BeforeCommit, []error{driverFailed}, []error{context.Canceled}, true},
		{"a refusal stays a refusal", ended, leases.ErrLeaseHeld, BeforeCommit, []error{leases.ErrLeaseHeld}, []error{context.Canceled}, true},
		{"the driver's own failure, the context ended", ended, driverFailed, BeforeCommit,
			[]error{driverFailed, context.Canceled, sessionEnded}, []error{leases.ErrOutcomeUnknown}, false},
		{"the driver said context.Canceled, the cause is kept", ended, fmt.Errorf("exec: %w", context.Canceled), BeforeCommit,
			[]error{context.Canceled, sessionEnded}, []error{leases.ErrOutcomeUnknown}, false},
		{"the driver said context.Canceled and the cause is the context's", cancelled, fmt.Errorf("exec: %w", context.Canceled), BeforeCommit,
			[]error{context.Canceled}, nil, false},
		{"database/sql's ErrTxDone after the context's end", ended, sql.ErrTxDone, BeforeCommit,
			[]error{sql.ErrTxDone, context.Canceled, sessionEnded}, nil, false},
		{"an unknown outcome, the context ended", ended, driverFailed, Unknown,
			[]error{leases.ErrOutcomeUnknown, driverFailed, context.Canceled, sessionEnded}, nil, false},
		{"an unknown outcome, live", live, driverFailed, Unknown, []error{leases.ErrOutcomeUnknown, driverFailed}, []error{context.Canceled}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.wrap(c.ctx, c.err)
			for _, w := range c.want {
				if !errors.Is(got, w) {
					t.Errorf("%v does not match %v", got, w)
				}
			}
			for _, w := range c.wantNot {
				if errors.Is(got, w) {
					t.Errorf("%v matches %v", got, w)
				}
			}
			if same := got == c.err; same != c.wantSame {
				t.Errorf("%v returned as it was: %v, want %v", got, same, c.wantSame)
			}
		})
	}
}

// lateTimer is a context whose deadline has passed and whose timer has
// not fired yet, as on a busy machine: it ends, with DeadlineExceeded,
// only once someone waits on Done.
type lateTimer struct {
	context.Context
	once sync.Once
	done chan struct{}
}

func newLateTimer() *lateTimer {
	return &lateTimer{Context: context.Background(), done: make(chan struct{})}
}

func (c *lateTimer) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

func (c *lateTimer) Done() <-chan struct{} {
	c.once.Do(func() { close(c.done) })
	return c.done
}

func (c *lateTimer) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// An answer that comes at the deadline, before the context's timer has
// fired (etcd's member answers at the gRPC deadline with its own
// timeout), is said as the deadline's: the error matches
// context.DeadlineExceeded, whichever timer ran first. A deadline still
// ahead is not waited for.
func TestAPassedDeadlineHasEnded(t *testing.T) {
	driverFailed := errors.New("etcdserver: request timed out")
	for _, c := range []struct {
		name string
		wrap func(context.Context, error) error
		want []error
	}{
		{"before commit", BeforeCommit, []error{driverFailed, context.DeadlineExceeded}},
		{"an unknown outcome", Unknown, []error{leases.ErrOutcomeUnknown, driverFailed, context.DeadlineExceeded}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.wrap(newLateTimer(), driverFailed)
			for _, w := range c.want {
				if !errors.Is(got, w) {
					t.Errorf("%v does not match %v", got, w)
				}
			}
		})
	}
	t.Run("a deadline ahead", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if Ended(ctx) {
			t.Fatal("a context an hour from its deadline has ended; want not")
		}
		if got := Unknown(ctx, driverFailed); errors.Is(got, context.DeadlineExceeded) {
			t.Errorf("%v matches the deadline an hour ahead", got)
		}
	})
}
