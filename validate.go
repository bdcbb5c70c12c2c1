package leases

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Limits on what the library stores, so that hostile input is refused with
// a clear error instead of bloating or confusing the database.
const (
	// MaxNameBytes bounds resource and holder names.
	MaxNameBytes = 256
	// MaxValueBytes bounds a receiver value.
	MaxValueBytes = 64 << 10
)

func checkText(kind, s string, maxBytes int, allowEmpty bool) error {
	switch {
	case s == "" && !allowEmpty:
		return fmt.Errorf("%w: %s is empty", ErrInvalidInput, kind)
	case len(s) > maxBytes:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalidInput, kind, len(s), maxBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidInput, kind)
	case strings.ContainsRune(s, 0):
		// SQLite's text functions stop at NUL; refuse rather than store a
		// name that compares differently from how it prints.
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalidInput, kind)
	}
	return nil
}

func checkName(kind, s string) error { return checkText(kind, s, MaxNameBytes, false) }

func checkTick(now int64) error {
	if now < 0 {
		return fmt.Errorf("%w: tick %d is negative", ErrInvalidInput, now)
	}
	return nil
}

func checkTTL(now, ttl int64) error {
	if ttl < 1 {
		return fmt.Errorf("%w: time-to-live %d is below 1 tick", ErrInvalidInput, ttl)
	}
	if ttl > math.MaxInt64-now {
		return fmt.Errorf("%w: tick %d plus time-to-live %d overflows", ErrInvalidInput, now, ttl)
	}
	return nil
}

func checkEpoch(epoch int64) error {
	if epoch < 1 {
		return fmt.Errorf("%w: epoch %d is below 1", ErrInvalidInput, epoch)
	}
	return nil
}

// firstError returns the first non-nil error, so that a message stays one
// line even when several arguments are wrong.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
