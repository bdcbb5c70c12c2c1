package rules

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"leases"
)

// check is one argument check's case: the error it returns, and whether
// that must be invalid input (a one-line ErrInvalidInput naming what) or
// nil.
type check struct {
	name    string
	err     error
	invalid bool
	says    string // part of the message, when invalid
}

func runChecks(t *testing.T, cases []check) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !c.invalid {
				checkKinds(t, c.err)
				return
			}
			checkSays(t, c.err, c.says, leases.ErrInvalidInput)
		})
	}
}

// Names are non-empty, at most MaxNameBytes bytes (bytes, not runes),
// valid UTF-8 without NUL; values the same but may be empty.
func TestCheckNameAndValue(t *testing.T) {
	atMost := strings.Repeat("n", leases.MaxNameBytes)
	wide := strings.Repeat("é", leases.MaxNameBytes/2) // two bytes a rune
	value := strings.Repeat("v", leases.MaxValueBytes)
	runChecks(t, []check{
		{"a name of one byte", CheckName("holder", "a"), false, ""},
		{"a name at MaxNameBytes", CheckName("holder", atMost), false, ""},
		{"a name one byte over MaxNameBytes", CheckName("holder", atMost+"n"), true, "holder is 257 bytes"},
		{"a name of two-byte runes at MaxNameBytes", CheckName("holder", wide), false, ""},
		{"a name of two-byte runes one over MaxNameBytes", CheckName("holder", wide+"n"), true, "more than 256"},
		{"an empty name", CheckName("resource", ""), true, "resource is empty"},
		{"a name with a NUL byte", CheckName("resource", "a\x00b"), true, "NUL"},
		{"a name not UTF-8", CheckName("resource", "a\xffb"), true, "UTF-8"},
		{"an empty value", CheckValue(""), false, ""},
		{"a value at MaxValueBytes", CheckValue(value), false, ""},
		{"a value one byte over MaxValueBytes", CheckValue(value + "v"), true, "value is 65537 bytes"},
		{"a value with a NUL byte", CheckValue("\x00"), true, "NUL"},
		{"a value not UTF-8", CheckValue("\xc3"), true, "UTF-8"},
	})
}

// Ticks from 0, time-to-lives from 1 tick whose expiry fits in an int64,
// epochs from 1, durations from a millisecond (in ticks, rounded down),
// the two receiver modes only.
func TestCheckNumbers(t *testing.T) {
	ticks := func(d time.Duration, want int64) error {
		got, err := CheckDuration(d)
		if err == nil && got != want {
			return errors.New("wrong number of ticks")
		}
		return err
	}
	runChecks(t, []check{
		{"tick 0", CheckTick(0), false, ""},
		{"tick -1", CheckTick(-1), true, "tick -1 is negative"},
		{"ttl 1", CheckTTL(0, 1), false, ""},
		{"ttl 0", CheckTTL(0, 0), true, "time-to-live 0 is below 1 tick"},
		{"ttl -1", CheckTTL(0, -1), true, "time-to-live -1"},
		{"an expiry at the largest tick", CheckTTL(10, math.MaxInt64-10), false, ""},
		{"an expiry one past the largest tick", CheckTTL(10, math.MaxInt64-9), true, "overflows"},
		{"a duration of 1ms: 1 tick", ticks(time.Millisecond, 1), false, ""},
		{"a duration just below 2ms: 1 tick, rounded down", ticks(2*time.Millisecond-1, 1), false, ""},
		{"a duration of 1.5s: 1500 ticks", ticks(1500*time.Millisecond, 1500), false, ""},
		{"a duration just below 1ms", ticks(time.Millisecond-1, 0), true, "below one tick (1ms)"},
		{"a duration of 0", ticks(0, 0), true, "time-to-live 0s"},
		{"a negative duration", ticks(-time.Second, 0), true, "time-to-live -1s"},
		{"epoch 1", CheckEpoch(1), false, ""},
		{"epoch 0", CheckEpoch(0), true, "epoch 0 is below 1"},
		{"epoch -1", CheckEpoch(-1), true, "epoch -1"},
		{"mode fenced", CheckMode(leases.Fenced), false, ""},
		{"mode unfenced", CheckMode(leases.Unfenced), false, ""},
		{"an empty mode", CheckMode(""), true, "neither"},
		{"mode Fenced, capitalised", CheckMode("Fenced"), true, `"Fenced"`},
	})
}

// Each operation's check refuses each of its arguments alone, and says
// the first wrong one only, on one line.
func TestCheckOperations(t *testing.T) {
	bad := func(f func(*leases.Lease)) leases.Lease {
		l := held
		f(&l)
		return l
	}
	runChecks(t, []check{
		{"acquire", CheckAcquire("r", "a", 0, 1), false, ""},
		{"acquire, no resource", CheckAcquire("", "a", 0, 1), true, "resource is empty"},
		{"acquire, no holder", CheckAcquire("r", "", 0, 1), true, "holder is empty"},
		{"acquire, a negative tick", CheckAcquire("r", "a", -1, 1), true, "tick -1"},
		{"acquire, ttl 0", CheckAcquire("r", "a", 0, 0), true, "time-to-live 0"},
		{"acquire, everything wrong: the first", CheckAcquire("", "", -1, 0), true, "resource is empty"},
		{"holder query", CheckHolder("r", 0), false, ""},
		{"holder query, no resource", CheckHolder("", 0), true, "resource is empty"},
		{"holder query, a negative tick", CheckHolder("r", -1), true, "tick -1"},
		{"held", CheckHeld(held, 0), false, ""},
		{"held, no resource", CheckHeld(bad(func(l *leases.Lease) { l.Resource = "" }), 0), true, "resource is empty"},
		{"held, no holder", CheckHeld(bad(func(l *leases.Lease) { l.Holder = "" }), 0), true, "holder is empty"},
		{"held, epoch 0", CheckHeld(bad(func(l *leases.Lease) { l.Epoch = 0 }), 0), true, "epoch 0"},
		{"held, a negative tick", CheckHeld(held, -1), true, "tick -1"},
		{"write", CheckWrite(leases.Fenced, "r", 1, ""), false, ""},
		{"write, no mode", CheckWrite("", "r", 1, ""), true, "receiver mode"},
		{"write, no resource", CheckWrite(leases.Unfenced, "", 1, ""), true, "resource is empty"},
		{"write, epoch 0", CheckWrite(leases.Fenced, "r", 0, ""), true, "epoch 0"},
		{"write, a NUL in the value", CheckWrite(leases.Fenced, "r", 1, "\x00"), true, "value contains a NUL"},
		{"guarded", CheckGuarded(held, 0, "v"), false, ""},
		{"guarded, epoch 0", CheckGuarded(bad(func(l *leases.Lease) { l.Epoch = 0 }), 0, "v"), true, "epoch 0"},
		{"guarded, a value not UTF-8", CheckGuarded(held, 0, "\xff"), true, "value is not valid UTF-8"},
		{"observe", CheckObserve(leases.Fenced, "r", 1), false, ""},
		{"observe, an unfenced receiver", CheckObserve(leases.Unfenced, "r", 1), true, "observe needs a fenced receiver"},
		{"observe, no resource", CheckObserve(leases.Fenced, "", 1), true, "resource is empty"},
		{"observe, epoch 0", CheckObserve(leases.Fenced, "r", 0), true, "epoch 0"},
	})
	first, second := errors.New("first"), errors.New("second")
	if err := First(); err != nil {
		t.Errorf("First() = %v; want nil", err)
	}
	if err := First(nil, first, second); err != first {
		t.Errorf("First(nil, first, second) = %v; want first", err)
	}
}

// A table name is a plain lower-case identifier of at most 63 bytes
// (PostgreSQL would truncate a longer one), not starting with a digit or
// with SQLite's reserved "sqlite_".
func TestCheckTableName(t *testing.T) {
	name := func(s string) error { return CheckTableName("fence table name", s) }
	atMost := strings.Repeat("t", MaxTableNameBytes)
	runChecks(t, []check{
		{"one letter", name("a"), false, ""},
		{"every allowed character", name("az_09"), false, ""},
		{"a leading underscore", name("_fence"), false, ""},
		{"at 63 bytes", name(atMost), false, ""},
		{"at 64 bytes", name(atMost + "t"), true, "fence table name is 64 bytes, more than 63"},
		{"empty", name(""), true, "fence table name is empty"},
		{"a leading 0", name("0fence"), true, "starts with a digit"},
		{"a leading 9", name("9fence"), true, "starts with a digit"},
		{"a digit after the first byte", name("f9"), false, ""},
		{"sqlite_ first", name("sqlite_fence"), true, "reserved by SQLite"},
		{"sqlite without the underscore", name("sqlitefence"), false, ""},
		{"sqlite_ not first", name("my_sqlite_fence"), false, ""},
		{"upper case", name("Fence"), true, `has 'F'`},
		{"the byte before a", name("fence`"), true, "has '`'"},
		{"the byte after z", name("fence{"), true, "has '{'"},
		{"the byte before 0", name("fence/"), true, "has '/'"},
		{"the byte after 9", name("fence:"), true, "has ':'"},
		{"a hyphen", name("my-fence"), true, "has '-'"},
		{"a quote", name(`f"; DROP TABLE x; --`), true, `has '"'`},
		{"a letter outside ASCII", name("fencé"), true, "has 'é'"},
	})
}
