package contract

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"leases"
)

// BadInputChangesNothing: bad input is refused with ErrInvalidInput in
// one line and changes nothing.
func BadInputChangesNothing(t *testing.T, b Backend) {
	held := BadInputSetup(t, b)
	RefuseEach(t, b, BadInputCalls(b, held), math.MaxInt)
	t.Run("a tick behind the last change is a refusal, not bad input", func(t *testing.T) { BehindIsARefusal(t, b, held) })
	t.Run("the limits are exact", func(t *testing.T) { LimitsAreExact(t, b) })
}

// BehindIsARefusal: a call whose tick is behind the last change to the
// lease (A's grant at tick 5, from BadInputSetup) is refused with
// ErrTickBackwards and a BackwardsError naming both ticks, and changes
// nothing. It is not ErrInvalidInput: callers whose clocks differ by a
// little produce it by racing, and a session retries it.
func BehindIsARefusal(t *testing.T, b Backend, held leases.Lease) {
	c := Calls{B: b, Held: held}
	before := b.State(t)
	for name, call := range map[string]func() error{
		"acquire": c.Acquire("r", "B", 4, 1),
		"renew":   c.Renew(held, 4, 1),
		"release": c.Release(held, 4),
	} {
		err := call()
		var behind *leases.BackwardsError
		if !errors.As(err, &behind) || behind.Tick != 4 || behind.Last != 5 || !errors.Is(err, leases.ErrTickBackwards) {
			t.Errorf("%s at tick 4, behind the grant at 5: %v; want a BackwardsError from tick 4 to 5", name, err)
		}
		if errors.Is(err, leases.ErrInvalidInput) || !leases.IsRefusal(err) {
			t.Errorf("%s behind the last change: %v is invalid input, or no refusal", name, err)
		}
		if after := b.State(t); after != before {
			t.Fatalf("%s behind the last change changed the store:\n%s\nbecame\n%s", name, before, after)
		}
	}
}

// LimitsAreExact: the documented limits, 256 bytes for a name and 64 KiB
// for a value, are accepted up to the last byte; one byte more is bad
// input (refused by BadInputCalls). The limits are pinned by value, as
// users size their names and values by the documented figures.
func LimitsAreExact(t *testing.T, b Backend) {
	if leases.MaxNameBytes != 256 || leases.MaxValueBytes != 65536 {
		t.Fatalf("limits %d and %d bytes; the documented ones are 256 and 65536", leases.MaxNameBytes, leases.MaxValueBytes)
	}
	ctx := context.Background()
	name, holder := strings.Repeat("n", leases.MaxNameBytes), strings.Repeat("h", leases.MaxNameBytes)
	l, err := b.Authority.Acquire(ctx, name, holder, 20, 1)
	if err != nil || l.Resource != name || l.Holder != holder {
		t.Fatalf("acquire with names of exactly %d bytes: %+v, %v", leases.MaxNameBytes, l, err)
	}
	value := strings.Repeat("v", leases.MaxValueBytes)
	if got := MustWrite(t, b.Fenced, name, l.Epoch, value); got.Outcome != leases.Accepted || got.Record != Written(l.Epoch, value) {
		t.Fatalf("a value of exactly %d bytes: outcome %s", leases.MaxValueBytes, got.Outcome)
	}
	if got, err := b.Guarded.Write(ctx, l, 20, value); err != nil || got.Outcome != leases.Accepted {
		t.Fatalf("a guarded value of exactly %d bytes: %v, %v", leases.MaxValueBytes, got.Outcome, err)
	}
}

// BadCall is one call that must be refused as invalid input.
type BadCall struct {
	Name string
	Call func() error
}

// BadInputSetup puts b in a state worth protecting, A's live lease on
// "r" (ticks 5 to 15) and A's value, and returns the lease.
func BadInputSetup(t *testing.T, b Backend) leases.Lease {
	t.Helper()
	held, err := b.Authority.Acquire(context.Background(), "r", "A", 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	MustWrite(t, b.Fenced, "r", held.Epoch, "v")
	return held
}

// Calls builds calls on a backend as BadInputSetup left it, each as the
// error it returns: what a bad-input test runs.
type Calls struct {
	B    Backend
	Held leases.Lease // A's live lease on "r", from BadInputSetup
}

// HeldWith is the held lease with change applied: a lease nobody was
// granted.
func (c Calls) HeldWith(change func(*leases.Lease)) leases.Lease {
	l := c.Held
	change(&l)
	return l
}

// Acquire is an acquire's error.
func (c Calls) Acquire(resource, holder string, now, ttl int64) func() error {
	return func() error {
		_, err := c.B.Authority.Acquire(context.Background(), resource, holder, now, ttl)
		return err
	}
}

// Renew is a renewal's error.
func (c Calls) Renew(l leases.Lease, now, ttl int64) func() error {
	return func() error { _, err := c.B.Authority.Renew(context.Background(), l, now, ttl); return err }
}

// Release is a release's error.
func (c Calls) Release(l leases.Lease, now int64) func() error {
	return func() error { return c.B.Authority.Release(context.Background(), l, now) }
}

// Holder is a holder query's error.
func (c Calls) Holder(resource string, now int64) func() error {
	return func() error { _, _, err := c.B.Authority.Lease(context.Background(), resource, now); return err }
}

// Write is a write's error.
func (c Calls) Write(r leases.Receiver, resource string, epoch int64, value string) func() error {
	return func() error { _, err := r.Write(context.Background(), resource, epoch, value); return err }
}

// Observe is an observe's error.
func (c Calls) Fence(r leases.Receiver, resource string, epoch int64) func() error {
	return func() error { _, err := r.Fence(context.Background(), resource, epoch); return err }
}

// Read is the error of a read of the fenced receiver.
func (c Calls) Read(resource string) func() error {
	return func() error { _, _, err := c.B.Fenced.Read(context.Background(), resource); return err }
}

// BadInputCalls are the contract's invalid calls, one or more per argument
// of the authority and the receivers, on b as BadInputSetup left it.
func BadInputCalls(b Backend, held leases.Lease) []BadCall {
	ctx := context.Background()
	c := Calls{B: b, Held: held}
	with, acquire, write := c.HeldWith, c.Acquire, c.Write
	return append([]BadCall{
		{"acquire: empty resource", acquire("", "B", 20, 1)},
		{"acquire: empty holder", acquire("r", "", 20, 1)},
		{"acquire: zero ttl", acquire("r", "B", 20, 0)},
		{"acquire: negative tick", acquire("other", "B", -1, 1)},
		{"acquire: expiry overflows", acquire("r", "B", 20, math.MaxInt64)},
		{"acquire: NUL in a name", acquire("r\x00x", "B", 20, 1)},
		{"acquire: invalid UTF-8", acquire("r\xff", "B", 20, 1)},
		{"acquire: name too long", acquire(strings.Repeat("r", leases.MaxNameBytes+1), "B", 20, 1)},
		{"renew: epoch 0", c.Renew(with(func(l *leases.Lease) { l.Epoch = 0 }), 6, 1)},
		{"renew: zero ttl", c.Renew(held, 6, 0)},
		{"release: negative epoch", c.Release(with(func(l *leases.Lease) { l.Epoch = -1 }), 6)},
		{"write: epoch 0", write(b.Fenced, "r", 0, "x")},
		{"write: empty resource", write(b.Fenced, "", 2, "x")},
		{"write: value too long", write(b.Fenced, "r", 2, strings.Repeat("x", leases.MaxValueBytes+1))},
		{"write: unknown receiver mode", write(b.Receiver("half-fenced"), "r", 2, "x")},
		{"unfenced write: epoch 0", write(b.Unfenced, "r", 0, "x")},
		{"observe: epoch 0", c.Fence(b.Fenced, "r", 0)},
		{"read: empty resource", c.Read("")},
		{"guarded write: epoch 0", func() error {
			_, err := b.Guarded.Write(ctx, with(func(l *leases.Lease) { l.Epoch = 0 }), 6, "x")
			return err
		}},
		{"guarded write: value too long", func() error {
			_, err := b.Guarded.Write(ctx, held, 6, strings.Repeat("x", leases.MaxValueBytes+1))
			return err
		}},
		{"guarded read: NUL in a name", func() error { _, _, err := b.Guarded.Read(ctx, "r\x00"); return err }},
		{"guarded read: empty resource", func() error { _, _, err := b.Guarded.Read(ctx, ""); return err }},
		{"holder: empty resource", c.Holder("", 6)},
		{"holder: negative tick", c.Holder("r", -1)},
	}, NameCalls(b, held)...)
}

// BadNames are names the one rule for resource and holder names refuses
// (see leases.MaxNameBytes), each with why.
var BadNames = []struct{ Why, Name string }{
	{"a tab", "a\tb"},
	{"a newline", "a\nb"},
	{"a carriage return", "a\rb"},
	{"an escape sequence", "\x1b[31mred"},
	{"DEL", "a\x7f"},
	{"a C1 control", "a\u0085b"},
	{"a line separator", "a\u2028b"},
	{"only spaces", "   "},
	{"only white space", "\u00a0\u3000"},
	{"empty", ""},
	{"too long", strings.Repeat("n", leases.MaxNameBytes+1)},
}

// NameCalls are, for each of BadNames, a call of every entry point of the
// authority and the receivers that takes a resource or a holder name,
// with that name in it, on b as BadInputSetup left it.
func NameCalls(b Backend, held leases.Lease) []BadCall {
	ctx := context.Background()
	c := Calls{B: b, Held: held}
	var calls []BadCall
	for _, bad := range BadNames {
		resource := c.HeldWith(func(l *leases.Lease) { l.Resource = bad.Name })
		holder := c.HeldWith(func(l *leases.Lease) { l.Holder = bad.Name })
		for _, call := range []BadCall{
			{"acquire: resource", c.Acquire(bad.Name, "B", 20, 1)},
			{"acquire: holder", c.Acquire("fresh", bad.Name, 20, 1)},
			{"renew: resource", c.Renew(resource, 6, 1)},
			{"renew: holder", c.Renew(holder, 6, 1)},
			{"release: resource", c.Release(resource, 6)},
			{"release: holder", c.Release(holder, 6)},
			{"holder", c.Holder(bad.Name, 6)},
			{"write", c.Write(b.Fenced, bad.Name, 2, "x")},
			{"unfenced write", c.Write(b.Unfenced, bad.Name, 2, "x")},
			{"observe", c.Fence(b.Fenced, bad.Name, 2)},
			{"read", c.Read(bad.Name)},
			{"unfenced read", func() error { _, _, err := b.Unfenced.Read(ctx, bad.Name); return err }},
			{"guarded write: resource", func() error { _, err := b.Guarded.Write(ctx, resource, 6, "x"); return err }},
			{"guarded write: holder", func() error { _, err := b.Guarded.Write(ctx, holder, 6, "x"); return err }},
			{"guarded read", func() error { _, _, err := b.Guarded.Read(ctx, bad.Name); return err }},
		} {
			calls = append(calls, BadCall{Name: call.Name + ": " + bad.Why, Call: call.Call})
		}
		calls = append(calls,
			BadCall{Name: "changed: " + bad.Why, Call: func() error { return changed(b.Authority, bad.Name) }},
			BadCall{Name: "live: " + bad.Why, Call: func() error { _, err := b.Authority.Live(ctx, 6, "r", bad.Name); return err }})
	}
	return calls
}

// changed is the error of a Changed of resource on x (an authority or a
// lessor); its watch, if any, is ended before it returns.
func changed(x interface {
	Changed(context.Context, string) (<-chan struct{}, error)
}, resource string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := x.Changed(ctx, resource)
	return err
}

// RefuseEach runs each call in a subtest of its own and fails it unless
// the call is refused with ErrInvalidInput, in one line of at most
// maxMessage bytes, and the store is as it was.
func RefuseEach(t *testing.T, b Backend, calls []BadCall, maxMessage int) {
	t.Helper()
	refuseEach(t, b.State, calls, maxMessage)
}

// refuseEach is RefuseEach on the store state renders.
func refuseEach(t *testing.T, state func(t *testing.T) string, calls []BadCall, maxMessage int) {
	t.Helper()
	before := state(t)
	for _, c := range calls {
		t.Run(c.Name, func(t *testing.T) {
			err := c.Call()
			if !errors.Is(err, leases.ErrInvalidInput) || strings.Contains(err.Error(), "\n") || len(err.Error()) > maxMessage {
				t.Fatalf("got %v; want one line of at most %d bytes matching ErrInvalidInput", err, maxMessage)
			}
			if after := state(t); after != before {
				t.Fatalf("the store changed:\n%s\nbecame\n%s", before, after)
			}
		})
	}
}
