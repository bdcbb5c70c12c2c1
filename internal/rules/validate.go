package rules

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"leases"
)

func checkText(kind, s string, maxBytes int, allowEmpty bool) error {
	switch {
	case s == "" && !allowEmpty:
		return fmt.Errorf("%w: %s is empty", leases.ErrInvalidInput, kind)
	case len(s) > maxBytes:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", leases.ErrInvalidInput, kind, len(s), maxBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", leases.ErrInvalidInput, kind)
	case strings.ContainsRune(s, 0):
		// SQLite's text functions stop at NUL; refuse rather than store a
		// name that compares differently from how it prints.
		return fmt.Errorf("%w: %s contains a NUL byte", leases.ErrInvalidInput, kind)
	}
	return nil
}

// CheckName is the one rule for resource and holder names, on every
// backend and entry point: a name is valid UTF-8 of 1 to MaxNameBytes
// bytes, not only white space, and without a control character (tab,
// newline, NUL, DEL, the C1 controls) or a line or paragraph separator.
// Such names print as something else, or break the one line an error or
// a listing gives them, and two of them can look the same.
func CheckName(kind, s string) error {
	if err := checkText(kind, s, leases.MaxNameBytes, false); err != nil {
		return err
	}
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("%w: %s %q is only white space", leases.ErrInvalidInput, kind, s)
	}
	if i := strings.IndexFunc(s, unprintable); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Errorf("%w: %s %q has the control character %U at byte %d", leases.ErrInvalidInput, kind, s, r, i)
	}
	return nil
}

// unprintable reports a rune a name may not hold: a control character
// (Unicode's Cc), or a line or paragraph separator.
func unprintable(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// CheckValue refuses an over-long, NUL-carrying or non-UTF-8 value; an
// empty value is fine.
func CheckValue(value string) error { return checkText("value", value, leases.MaxValueBytes, true) }

// CheckTick refuses a negative tick.
func CheckTick(now int64) error {
	if now < 0 {
		return fmt.Errorf("%w: tick %d is negative", leases.ErrInvalidInput, now)
	}
	return nil
}

// CheckTTL refuses a time-to-live below 1 tick, or one whose expiry tick
// would overflow.
func CheckTTL(now, ttl int64) error {
	if ttl < 1 {
		return fmt.Errorf("%w: time-to-live %d is below 1 tick", leases.ErrInvalidInput, ttl)
	}
	if ttl > math.MaxInt64-now {
		return fmt.Errorf("%w: tick %d plus time-to-live %d overflows", leases.ErrInvalidInput, now, ttl)
	}
	return nil
}

// CheckDuration refuses a time-to-live below one tick (a millisecond) and
// returns it in ticks, rounded down.
func CheckDuration(ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("%w: time-to-live %v is below one tick (1ms)", leases.ErrInvalidInput, ttl)
	}
	return ttl.Milliseconds(), nil
}

// CheckEpoch refuses an epoch below 1.
func CheckEpoch(epoch int64) error {
	if epoch < 1 {
		return fmt.Errorf("%w: epoch %d is below 1", leases.ErrInvalidInput, epoch)
	}
	return nil
}

// CheckMode refuses a receiver mode that is neither fenced nor unfenced.
func CheckMode(mode leases.Mode) error {
	if mode != leases.Fenced && mode != leases.Unfenced {
		return fmt.Errorf("%w: receiver mode %q is neither %q nor %q", leases.ErrInvalidInput, mode, leases.Fenced, leases.Unfenced)
	}
	return nil
}

// CheckAcquire checks an acquire's arguments.
func CheckAcquire(resource, holder string, now, ttl int64) error {
	return First(CheckName("resource", resource), CheckName("holder", holder), CheckTick(now), CheckTTL(now, ttl))
}

// CheckHolder checks a holder query's arguments.
func CheckHolder(resource string, now int64) error {
	return First(CheckName("resource", resource), CheckTick(now))
}

// CheckHeld checks the lease a renew or release names, and its tick.
func CheckHeld(held leases.Lease, now int64) error {
	return First(CheckName("resource", held.Resource), CheckName("holder", held.Holder),
		CheckEpoch(held.Epoch), CheckTick(now))
}

// CheckWrite checks a receiver write's arguments.
func CheckWrite(mode leases.Mode, resource string, epoch int64, value string) error {
	return First(CheckMode(mode), CheckName("resource", resource), CheckEpoch(epoch), CheckValue(value))
}

// CheckGuarded checks a guarded receiver write's arguments.
func CheckGuarded(held leases.Lease, now int64, value string) error {
	return First(CheckHeld(held, now), CheckValue(value))
}

// CheckObserve checks an observe's arguments: only a fenced receiver has
// a fence to raise.
func CheckObserve(mode leases.Mode, resource string, epoch int64) error {
	if mode != leases.Fenced {
		return fmt.Errorf("%w: observe needs a %s receiver, not %q", leases.ErrInvalidInput, leases.Fenced, mode)
	}
	return First(CheckName("resource", resource), CheckEpoch(epoch))
}

// First returns the first non-nil error, so that a message stays one
// line even when several arguments are wrong.
func First(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// MaxTableNameBytes is PostgreSQL's identifier length (NAMEDATALEN - 1):
// a longer name would be truncated, silently, to another name.
const MaxTableNameBytes = 63

// CheckTableName refuses a table name (kind says which, in the message)
// that is not a plain identifier: lower-case ASCII letters, digits and
// underscores, not starting with a digit nor with "sqlite_" (SQLite
// reserves those), at most MaxTableNameBytes. Such a name is written into
// SQL, so nothing else may reach it; lower case because PostgreSQL folds
// unquoted names to it.
func CheckTableName(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s is empty", leases.ErrInvalidInput, kind)
	case len(name) > MaxTableNameBytes:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", leases.ErrInvalidInput, kind, len(name), MaxTableNameBytes)
	case name[0] >= '0' && name[0] <= '9':
		return fmt.Errorf("%w: %s %q starts with a digit", leases.ErrInvalidInput, kind, name)
	case strings.HasPrefix(name, "sqlite_"):
		return fmt.Errorf("%w: %s %q starts with sqlite_, reserved by SQLite", leases.ErrInvalidInput, kind, name)
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return fmt.Errorf("%w: %s %q has %q: only a-z, 0-9 and _ are allowed", leases.ErrInvalidInput, kind, name, c)
		}
	}
	return nil
}
