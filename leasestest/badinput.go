package leasestest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"leases"
)

// BadName is a resource or holder name that the one rule for names
// refuses (see leases.MaxNameBytes), and why.
type BadName struct{ Why, Name string }

// BadNames returns the names that every entry point taking a resource or
// a holder name must refuse with leases.ErrInvalidInput: the suite's, for
// a backend's own entry points beyond the contract's.
func BadNames() []BadName {
	return []BadName{
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
}

// maxMessage bounds a refusal's message: one line, which may quote the
// name it refuses.
const maxMessage = 1024

// badCall is one call that must be refused as invalid input.
type badCall struct {
	name string
	call func() error
}

// refuseEach is the failures of calls, each of which must be refused
// with leases.ErrInvalidInput in one line of at most maxMessage bytes
// and leave the store as it was.
func refuseEach(ctx context.Context, b Backend, calls []badCall) error {
	before, err := snapshot(ctx, b)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range calls {
		err := c.call()
		if !errors.Is(err, leases.ErrInvalidInput) || strings.Contains(err.Error(), "\n") || len(err.Error()) > maxMessage {
			errs = append(errs, fmt.Errorf("%s: %v; want one line of at most %d bytes matching ErrInvalidInput", c.name, err, maxMessage))
			continue
		}
		if err := unchanged(ctx, b, before, c.name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkBadInput puts the store in a state worth protecting, A's live
// lease on "r" (ticks 5 to 15) and A's value, and refuses every bad call
// on it; then a tick behind the grant, which is a refusal of another
// kind, and the limits, exact to the byte.
func checkBadInput(ctx context.Context, b Backend) error {
	held, err := acquire(ctx, b, "r", "A", 5, 10)
	if err != nil {
		return err
	}
	if b.Fenced != nil {
		if _, err := write(ctx, b.Fenced, "r", held.Epoch, "v"); err != nil {
			return err
		}
	}
	calls := append(authorityBadCalls(ctx, b, held), receiverBadCalls(ctx, b, held)...)
	return errors.Join(
		refuseEach(ctx, b, append(calls, nameBadCalls(ctx, b, held)...)),
		behindIsARefusal(ctx, b, held),
		limitsAreExact(ctx, b))
}

// with is held with change applied: a lease nobody was granted.
func with(held leases.Lease, change func(*leases.Lease)) leases.Lease {
	change(&held)
	return held
}

// calls builds the error of each entry point's call.
type calls struct {
	ctx context.Context
	b   Backend
}

func (c calls) acquire(resource, holder string, now, ttl int64) func() error {
	return func() error { _, err := c.b.Authority.Acquire(c.ctx, resource, holder, now, ttl); return err }
}

func (c calls) renew(l leases.Lease, now, ttl int64) func() error {
	return func() error { _, err := c.b.Authority.Renew(c.ctx, l, now, ttl); return err }
}

func (c calls) release(l leases.Lease, now int64) func() error {
	return func() error { return c.b.Authority.Release(c.ctx, l, now) }
}

func (c calls) lease(resource string, now int64) func() error {
	return func() error { _, _, err := c.b.Authority.Lease(c.ctx, resource, now); return err }
}

func (c calls) write(r leases.Receiver, resource string, epoch int64, value string) func() error {
	return func() error { _, err := r.Write(c.ctx, resource, epoch, value); return err }
}

func (c calls) fence(r leases.Receiver, resource string, epoch int64) func() error {
	return func() error { _, err := r.Fence(c.ctx, resource, epoch); return err }
}

func (c calls) read(r reader, resource string) func() error {
	return func() error { _, _, err := r.Read(c.ctx, resource); return err }
}

func (c calls) guarded(held leases.Lease, now int64, value string) func() error {
	return func() error { _, err := c.b.Guarded.Write(c.ctx, held, now, value); return err }
}

// changed is the error of a Changed of resource on x (an authority or a
// lessor); its watch, if any, is ended before it returns.
func (c calls) changed(x interface {
	Changed(context.Context, string) (<-chan struct{}, error)
}, resource string) func() error {
	return func() error {
		ctx, cancel := context.WithCancel(c.ctx)
		defer cancel()
		_, err := x.Changed(ctx, resource)
		return err
	}
}

// authorityBadCalls are the authority's invalid calls, beside the names.
func authorityBadCalls(ctx context.Context, b Backend, held leases.Lease) []badCall {
	c := calls{ctx, b}
	return []badCall{
		{"acquire: zero ttl", c.acquire("r", "B", 20, 0)},
		{"acquire: negative ttl", c.acquire("r", "B", 20, -1)},
		{"acquire: negative tick", c.acquire("other", "B", -1, 1)},
		{"acquire: expiry overflows", c.acquire("r", "B", 20, math.MaxInt64)},
		{"acquire: NUL in a name", c.acquire("r\x00x", "B", 20, 1)},
		{"acquire: invalid UTF-8", c.acquire("r\xff", "B", 20, 1)},
		{"renew: epoch 0", c.renew(with(held, func(l *leases.Lease) { l.Epoch = 0 }), 6, 1)},
		{"renew: zero ttl", c.renew(held, 6, 0)},
		{"renew: negative tick", c.renew(held, -1, 1)},
		{"release: negative epoch", c.release(with(held, func(l *leases.Lease) { l.Epoch = -1 }), 6)},
		{"release: negative tick", c.release(held, -1)},
		{"lease: negative tick", c.lease("r", -1)},
		{"live: negative tick", func() error { _, err := b.Authority.Live(ctx, -1); return err }},
	}
}

// receiverBadCalls are the receivers' invalid calls, beside the names,
// for the receivers b gives.
func receiverBadCalls(ctx context.Context, b Backend, held leases.Lease) []badCall {
	c := calls{ctx, b}
	var bad []badCall
	if b.Fenced != nil {
		bad = append(bad,
			badCall{"write: epoch 0", c.write(b.Fenced, "r", 0, "x")},
			badCall{"write: value too long", c.write(b.Fenced, "r", 2, strings.Repeat("x", leases.MaxValueBytes+1))},
			badCall{"fence: epoch 0", c.fence(b.Fenced, "r", 0)})
	}
	if b.Unfenced != nil {
		bad = append(bad,
			badCall{"unfenced write: epoch 0", c.write(b.Unfenced, "r", 0, "x")},
			badCall{"unfenced write: value too long", c.write(b.Unfenced, "r", 2, strings.Repeat("x", leases.MaxValueBytes+1))})
	}
	if b.Guarded != nil {
		bad = append(bad,
			badCall{"guarded write: epoch 0", c.guarded(with(held, func(l *leases.Lease) { l.Epoch = 0 }), 6, "x")},
			badCall{"guarded write: negative tick", c.guarded(held, -1, "x")},
			badCall{"guarded write: value too long", c.guarded(held, 6, strings.Repeat("x", leases.MaxValueBytes+1))})
	}
	return bad
}

// nameBadCalls are, for each of BadNames, a call of every entry point of
// the authority and the receivers that takes a resource or a holder name,
// with that name in it.
func nameBadCalls(ctx context.Context, b Backend, held leases.Lease) []badCall {
	c := calls{ctx, b}
	var bad []badCall
	for _, name := range BadNames() {
		resource := with(held, func(l *leases.Lease) { l.Resource = name.Name })
		holder := with(held, func(l *leases.Lease) { l.Holder = name.Name })
		each := []badCall{
			{"acquire: resource", c.acquire(name.Name, "B", 20, 1)},
			{"acquire: holder", c.acquire("fresh", name.Name, 20, 1)},
			{"renew: resource", c.renew(resource, 6, 1)},
			{"renew: holder", c.renew(holder, 6, 1)},
			{"release: resource", c.release(resource, 6)},
			{"release: holder", c.release(holder, 6)},
			{"lease", c.lease(name.Name, 6)},
			{"live", func() error { _, err := b.Authority.Live(ctx, 6, "r", name.Name); return err }},
			{"changed", c.changed(b.Authority, name.Name)},
		}
		if b.Fenced != nil {
			each = append(each,
				badCall{"write", c.write(b.Fenced, name.Name, 2, "x")},
				badCall{"fence", c.fence(b.Fenced, name.Name, 2)},
				badCall{"read", c.read(b.Fenced, name.Name)})
		}
		if b.Unfenced != nil {
			each = append(each,
				badCall{"unfenced write", c.write(b.Unfenced, name.Name, 2, "x")},
				badCall{"unfenced read", c.read(b.Unfenced, name.Name)})
		}
		if b.Guarded != nil {
			each = append(each,
				badCall{"guarded write: resource", c.guarded(resource, 6, "x")},
				badCall{"guarded write: holder", c.guarded(holder, 6, "x")},
				badCall{"guarded read", c.read(b.Guarded, name.Name)})
		}
		for _, call := range each {
			bad = append(bad, badCall{call.name + ": " + name.Why, call.call})
		}
	}
	return bad
}

// behindIsARefusal: a call whose tick is behind the last change to the
// lease (the grant at 5) is refused with a *leases.BackwardsError naming
// both ticks, and changes nothing. It is not ErrInvalidInput: callers
// whose clocks differ by a little produce it by racing, and a session
// retries it.
func behindIsARefusal(ctx context.Context, b Backend, held leases.Lease) error {
	c := calls{ctx, b}
	before, err := snapshot(ctx, b)
	if err != nil {
		return err
	}
	var errs []error
	for _, call := range []badCall{
		{"acquire", c.acquire("r", "B", 4, 1)},
		{"renew", c.renew(held, 4, 1)},
		{"release", c.release(held, 4)},
	} {
		err := call.call()
		var behind *leases.BackwardsError
		if !errors.As(err, &behind) || behind.Tick != 4 || behind.Last != 5 || !errors.Is(err, leases.ErrTickBackwards) ||
			errors.Is(err, leases.ErrInvalidInput) || !leases.IsRefusal(err) {
			errs = append(errs, fmt.Errorf("%s at tick 4, behind the grant at 5: %v; want a *leases.BackwardsError from tick 4 to 5, a refusal but not invalid input", call.name, err))
		}
		if err := unchanged(ctx, b, before, call.name+" behind the last change"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// limitsAreExact: the documented limits, 256 bytes for a name and 64 KiB
// for a value, are accepted up to the last byte (one byte more is bad
// input, above). They are pinned by value, as users size their names and
// values by the documented figures.
func limitsAreExact(ctx context.Context, b Backend) error {
	if leases.MaxNameBytes != 256 || leases.MaxValueBytes != 65536 {
		return fmt.Errorf("limits %d and %d bytes; the documented ones are 256 and 65536", leases.MaxNameBytes, leases.MaxValueBytes)
	}
	name, holder := strings.Repeat("n", leases.MaxNameBytes), strings.Repeat("h", leases.MaxNameBytes)
	l, err := b.Authority.Acquire(ctx, name, holder, 20, 1)
	if err != nil || l.Resource != name || l.Holder != holder {
		return fmt.Errorf("acquire with names of exactly %d bytes: %+v, %v", leases.MaxNameBytes, l, err)
	}
	value := strings.Repeat("v", leases.MaxValueBytes)
	if b.Fenced != nil {
		if err := wantWrite(ctx, b.Fenced, name, l.Epoch, value, leases.Accepted, written(l.Epoch, value)); err != nil {
			return fmt.Errorf("a value of exactly %d bytes: %w", leases.MaxValueBytes, err)
		}
	}
	if b.Guarded != nil {
		if got, err := b.Guarded.Write(ctx, l, 20, value); err != nil || got.Outcome != leases.Accepted {
			return fmt.Errorf("a guarded value of exactly %d bytes: %v, %v", leases.MaxValueBytes, got.Outcome, err)
		}
	}
	return nil
}
