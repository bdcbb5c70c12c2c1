package rules

import (
	"context"
	"errors"
	"fmt"

	"leases"
)

// BeforeCommit marks err, a failure before anything that could change the
// store was sent, as caused by the context when the context has ended, so
// that errors.Is(err, context.Canceled) holds whatever the interrupted
// call said. A refusal stays a refusal: it was decided on what the store
// held.
func BeforeCommit(ctx context.Context, err error) error {
	if ctx.Err() == nil || leases.IsRefusal(err) {
		return err
	}
	return fmt.Errorf("cancelled before commit, nothing changed: %w", WithContext(ctx, err))
}

// WithContext wraps err with the context's error and cause when the
// context has ended and err does not say so already.
func WithContext(ctx context.Context, err error) error {
	ctxErr := ctx.Err()
	if ctxErr == nil || errors.Is(err, ctxErr) {
		return err
	}
	if cause := context.Cause(ctx); cause != ctxErr {
		return fmt.Errorf("%w (%w): %w", ctxErr, cause, err)
	}
	return fmt.Errorf("%w: %w", ctxErr, err)
}

// Granted is what an acquire of resource for holder at tick now answers
// once its transaction has ended with err: the lease on success; on an
// unknown outcome, the lease it would have granted beside the error, since
// that lease may now be live until its expiry tick; otherwise no lease.
func Granted(lease leases.Lease, err error, resource, holder string, now int64) (leases.Lease, error) {
	if err == nil {
		return lease, nil
	}
	err = fmt.Errorf("acquire %q for %q at tick %d: %w", resource, holder, now, err)
	if errors.Is(err, leases.ErrOutcomeUnknown) {
		return lease, err
	}
	return leases.Lease{}, err
}
