package etcd_test

// The contract of package leases, written against its interfaces only, so
// that any backend can run it: TestContract (backend_test.go) runs it on
// etcd. Nothing in this file knows which backend it tests.

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"leases"
)

// backend is a fresh, empty store of the backend under test.
type backend struct {
	authority        leases.Authority
	fenced, unfenced leases.Receiver
	guarded          leases.GuardedReceiver
	receiver         func(leases.Mode) leases.Receiver // of any mode, valid or not
	// state renders everything the store holds, down to what would show
	// a rewrite of an unchanged value, so that a test can show that a
	// call changed nothing.
	state func(t *testing.T) string
}

// contract is every clause, one subtest each.
var contract = []struct {
	name string
	run  func(t *testing.T, b backend)
}{
	{"epochs increase per resource", testEpochsIncreasePerResource},
	{"expiry boundary", testExpiryBoundary},
	{"renew extends only the holder's live lease", testRenewExtendsOnlyTheHoldersLiveLease},
	{"release never reuses an epoch", testReleaseNeverReusesEpoch},
	{"fenced receiver outcomes", testFencedReceiverOutcomes},
	{"observe raises the fence and keeps the value", testObserveOutcomes},
	{"unfenced receiver stores whatever comes last", testUnfencedReceiverStoresWhateverComesLast},
	{"guarded receiver outcomes", testGuardedReceiverOutcomes},
	{"bad input changes nothing", testBadInputChangesNothing},
}

// runContract runs every clause, each on a fresh store from newBackend.
func runContract(t *testing.T, newBackend func(t *testing.T) backend) {
	for _, clause := range contract {
		t.Run(clause.name, func(t *testing.T) { clause.run(t, newBackend(t)) })
	}
}

// step is one call in a scripted run of an authority and what it must
// give. Scripts interleave two resources, so that every step also shows
// it left the other alone.
type step struct {
	name     string
	op       string // "acquire", "renew" or "release"
	resource string // acquire
	holder   string // acquire
	lease    string // renew, release: the saved lease to use; "~x" is x with holder "B"
	tick     int64
	ttl      int64 // acquire, renew
	want     leases.Lease
	wantErr  error  // the sentinel the call must match; nil: it must succeed
	save     string // keep the lease the call returns under this name
}

// script runs steps in order against b's authority. A refused step must
// leave the store as it was.
func script(t *testing.T, b backend, steps []step) {
	t.Helper()
	ctx := context.Background()
	saved := map[string]leases.Lease{}
	for i, s := range steps {
		held := saved[strings.TrimPrefix(s.lease, "~")]
		if strings.HasPrefix(s.lease, "~") {
			held.Holder = "B"
		}
		before := b.state(t)
		var got leases.Lease
		var err error
		switch s.op {
		case "acquire":
			got, err = b.authority.Acquire(ctx, s.resource, s.holder, s.tick, s.ttl)
		case "renew":
			got, err = b.authority.Renew(ctx, held, s.tick, s.ttl)
		case "release":
			err = b.authority.Release(ctx, held, s.tick)
		default:
			t.Fatalf("step %d: unknown operation %q", i+1, s.op)
		}
		switch {
		case s.wantErr != nil:
			if !errors.Is(err, s.wantErr) || got != (leases.Lease{}) {
				t.Fatalf("step %d (%s): %+v, %v; want no lease and %v", i+1, s.name, got, err, s.wantErr)
			}
			if after := b.state(t); after != before {
				t.Fatalf("step %d (%s): a refusal changed the store:\n%s\nbecame\n%s", i+1, s.name, before, after)
			}
		case err != nil:
			t.Fatalf("step %d (%s): %v", i+1, s.name, err)
		case s.op != "release" && got != s.want:
			t.Fatalf("step %d (%s): got %+v, want %+v", i+1, s.name, got, s.want)
		}
		if s.save != "" {
			saved[s.save] = got
		}
	}
}

func leaseOf(resource, holder string, epoch, grantedAt, expiresAt int64) leases.Lease {
	return leases.Lease{Resource: resource, Holder: holder, Epoch: epoch, GrantedAt: grantedAt, ExpiresAt: expiresAt}
}

// written is the record a write of value at epoch leaves behind.
func written(epoch int64, value string) leases.Record {
	return leases.Record{Epoch: epoch, ValueEpoch: epoch, Value: value}
}

// Epochs strictly increase per resource, resources do not share a
// sequence, and a holder that comes back gets a new epoch, its old lease
// no longer its own.
func testEpochsIncreasePerResource(t *testing.T, b backend) {
	script(t, b, []step{
		{name: "A on alpha", op: "acquire", resource: "alpha", holder: "A", tick: 0, ttl: 2, want: leaseOf("alpha", "A", 1, 0, 2), save: "a1"},
		{name: "A on beta starts at 1 again", op: "acquire", resource: "beta", holder: "A", tick: 0, ttl: 3, want: leaseOf("beta", "A", 1, 0, 3)},
		{name: "B on alpha at A's expiry", op: "acquire", resource: "alpha", holder: "B", tick: 2, ttl: 2, want: leaseOf("alpha", "B", 2, 2, 4)},
		{name: "beta is still A's", op: "acquire", resource: "beta", holder: "B", tick: 2, ttl: 2, wantErr: leases.ErrLeaseHeld},
		{name: "C on alpha", op: "acquire", resource: "alpha", holder: "C", tick: 4, ttl: 2, want: leaseOf("alpha", "C", 3, 4, 6)},
		{name: "A back on alpha", op: "acquire", resource: "alpha", holder: "A", tick: 6, ttl: 2, want: leaseOf("alpha", "A", 4, 6, 8), save: "a4"},
		{name: "A's epoch-1 lease is not renewable", op: "renew", lease: "a1", tick: 6, ttl: 2, wantErr: leases.ErrNotHolder},
		{name: "nor releasable", op: "release", lease: "a1", tick: 6, wantErr: leases.ErrNotHolder},
		{name: "A's epoch-4 lease is", op: "renew", lease: "a4", tick: 7, ttl: 2, want: leaseOf("alpha", "A", 4, 6, 9)},
		{name: "B on beta later", op: "acquire", resource: "beta", holder: "B", tick: 9, ttl: 1, want: leaseOf("beta", "B", 2, 9, 10)},
	})
}

// A lease granted at t for d ticks is live at t+d-1 and expired at t+d;
// the refusal names the holder and the expiry tick.
func testExpiryBoundary(t *testing.T, b backend) {
	const grantedAt, ttl = 10, 5 // expires at tick 15
	ctx := context.Background()
	cases := []struct {
		name      string
		resource  string
		holder    string
		now       int64
		wantEpoch int64 // 0: refused
	}{
		{"another holder one tick before expiry", "r1", "B", grantedAt + ttl - 1, 0},
		{"another holder at the grant tick", "r2", "B", grantedAt, 0},
		{"the same holder before expiry", "r3", "A", grantedAt + ttl - 1, 0},
		{"another holder at exactly the expiry tick", "r4", "B", grantedAt + ttl, 2},
		{"the same holder at the expiry tick", "r5", "A", grantedAt + ttl, 2},
		{"another holder long after expiry", "r6", "B", grantedAt + 10*ttl, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.authority.Acquire(ctx, tc.resource, "A", grantedAt, ttl); err != nil {
				t.Fatal(err)
			}
			lease, err := b.authority.Acquire(ctx, tc.resource, tc.holder, tc.now, ttl)
			if tc.wantEpoch == 0 {
				if !errors.Is(err, leases.ErrLeaseHeld) {
					t.Fatalf("acquire at %d: got %+v, %v; want ErrLeaseHeld", tc.now, lease, err)
				}
				if msg := err.Error(); !strings.Contains(msg, `"A"`) || !strings.Contains(msg, "until tick 15") {
					t.Errorf("refusal %q should name the holder and its expiry tick", msg)
				}
				return
			}
			if want := leaseOf(tc.resource, tc.holder, tc.wantEpoch, tc.now, tc.now+ttl); err != nil || lease != want {
				t.Fatalf("acquire at %d: got %+v, %v; want %+v", tc.now, lease, err, want)
			}
		})
	}
}

// Renewal extends the holder's live lease under the same epoch and grant
// tick, never to an earlier expiry; nobody else can renew it, an expired
// lease cannot be renewed, and a renewal leaves other resources alone.
func testRenewExtendsOnlyTheHoldersLiveLease(t *testing.T, b backend) {
	script(t, b, []step{
		{name: "A acquires r", op: "acquire", resource: "r", holder: "A", tick: 0, ttl: 3, want: leaseOf("r", "A", 1, 0, 3), save: "a"},
		{name: "B acquires other", op: "acquire", resource: "other", holder: "B", tick: 0, ttl: 3, want: leaseOf("other", "B", 1, 0, 3)},
		{name: "A renews", op: "renew", lease: "a", tick: 2, ttl: 3, want: leaseOf("r", "A", 1, 0, 5), save: "a"},
		{name: "r is held at its old expiry tick", op: "acquire", resource: "r", holder: "B", tick: 3, ttl: 3, wantErr: leases.ErrLeaseHeld},
		{name: "other was not renewed", op: "acquire", resource: "other", holder: "C", tick: 3, ttl: 3, want: leaseOf("other", "C", 2, 3, 6)},
		{name: "a long renewal", op: "renew", lease: "a", tick: 4, ttl: 10, want: leaseOf("r", "A", 1, 0, 14), save: "a"},
		{name: "a short renewal never moves the expiry earlier", op: "renew", lease: "a", tick: 5, ttl: 1, want: leaseOf("r", "A", 1, 0, 14), save: "a"},
		{name: "r is held until tick 14", op: "acquire", resource: "r", holder: "B", tick: 13, ttl: 3, wantErr: leases.ErrLeaseHeld},
		{name: "a tick before the last renewal", op: "renew", lease: "a", tick: 4, ttl: 3, wantErr: leases.ErrTickBackwards},
		{name: "another holder cannot renew", op: "renew", lease: "~a", tick: 13, ttl: 3, wantErr: leases.ErrNotHolder},
		{name: "not at the expiry tick", op: "renew", lease: "a", tick: 14, ttl: 3, wantErr: leases.ErrLeaseExpired},
		{name: "B takes r at the expiry tick", op: "acquire", resource: "r", holder: "B", tick: 14, ttl: 3, want: leaseOf("r", "B", 2, 14, 17)},
		{name: "nor after a new grant", op: "renew", lease: "a", tick: 15, ttl: 3, wantErr: leases.ErrNotHolder},
	})
}

// Release frees the resource at once and only that resource, but its
// epoch is never handed out again.
func testReleaseNeverReusesEpoch(t *testing.T, b backend) {
	script(t, b, []step{
		{name: "A acquires r", op: "acquire", resource: "r", holder: "A", tick: 0, ttl: 100, want: leaseOf("r", "A", 1, 0, 100), save: "a"},
		{name: "A acquires other", op: "acquire", resource: "other", holder: "A", tick: 0, ttl: 100, want: leaseOf("other", "A", 1, 0, 100)},
		{name: "another holder cannot release", op: "release", lease: "~a", tick: 1, wantErr: leases.ErrNotHolder},
		{name: "A releases r", op: "release", lease: "a", tick: 5},
		{name: "other is still held", op: "acquire", resource: "other", holder: "B", tick: 5, ttl: 2, wantErr: leases.ErrLeaseHeld},
		{name: "a tick before the release", op: "acquire", resource: "r", holder: "B", tick: 4, ttl: 2, wantErr: leases.ErrTickBackwards},
		{name: "a second release", op: "release", lease: "a", tick: 5, wantErr: leases.ErrNotHolder},
		{name: "nor a renewal", op: "renew", lease: "a", tick: 5, ttl: 2, wantErr: leases.ErrNotHolder},
		{name: "B at the release tick, a new epoch", op: "acquire", resource: "r", holder: "B", tick: 5, ttl: 2, want: leaseOf("r", "B", 2, 5, 7), save: "b"},
		{name: "an expired lease", op: "release", lease: "b", tick: 7, wantErr: leases.ErrLeaseExpired},
		{name: "A again, never epoch 1 or 2", op: "acquire", resource: "r", holder: "A", tick: 7, ttl: 2, want: leaseOf("r", "A", 3, 7, 9)},
	})
}

// mustWrite writes and fails the test on an error.
func mustWrite(t *testing.T, r leases.Receiver, resource string, epoch int64, value string) leases.WriteResult {
	t.Helper()
	result, err := r.Write(context.Background(), resource, epoch, value)
	if err != nil {
		t.Fatalf("write %s epoch %d: %v", resource, epoch, err)
	}
	return result
}

// Every outcome of the fenced receiver, with the stored record unchanged
// on replay, conflict and stale, and another resource's record left alone.
func testFencedReceiverOutcomes(t *testing.T, b backend) {
	ctx := context.Background()
	stored := written(2, "v2")
	bystander := mustWrite(t, b.fenced, "other", 9, "kept").Record
	cases := []struct {
		name     string
		resource string
		empty    bool
		epoch    int64
		value    string
		want     leases.Outcome
	}{
		{"first write to an empty receiver", "r1", true, 1, "v1", leases.Accepted},
		{"higher epoch", "r2", false, 3, "v3", leases.Accepted},
		{"equal epoch and value: replay", "r3", false, 2, "v2", leases.Replay},
		{"equal epoch, other value: conflict", "r4", false, 2, "other", leases.Conflict},
		{"lower epoch: stale", "r5", false, 1, "v1", leases.Stale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.empty {
				mustWrite(t, b.fenced, tc.resource, stored.Epoch, stored.Value)
			}
			before := b.state(t)
			got := mustWrite(t, b.fenced, tc.resource, tc.epoch, tc.value)
			if got.Outcome != tc.want {
				t.Fatalf("outcome %s, want %s", got.Outcome, tc.want)
			}
			want := stored
			if tc.want == leases.Accepted {
				want = written(tc.epoch, tc.value)
			} else if after := b.state(t); after != before {
				t.Errorf("a %s write changed the store:\n%s\nbecame\n%s", got.Outcome, before, after)
			}
			read, found, err := b.fenced.Read(ctx, tc.resource)
			if err != nil || !found || read != want || got.Record != want {
				t.Errorf("stored %+v (found %v, %v), reported %+v; want %+v", read, found, err, got.Record, want)
			}
			if other, _, err := b.fenced.Read(ctx, "other"); err != nil || other != bystander {
				t.Errorf("another resource's record became %+v, %v; want %+v", other, err, bystander)
			}
		})
	}
	if _, found, err := b.fenced.Read(ctx, "never-written"); err != nil || found {
		t.Errorf("read of a resource never written: found %v, %v", found, err)
	}
}

// Observe raises the fence without a value (Accepted), is a replay at the
// fence, and stale below it; the stored value stays, and the first write
// at the observed epoch is accepted.
func testObserveOutcomes(t *testing.T, b backend) {
	ctx := context.Background()
	observe := func(resource string, epoch int64, want leases.Outcome, record leases.Record) {
		t.Helper()
		before := b.state(t)
		got, err := b.fenced.Observe(ctx, resource, epoch)
		if err != nil || got.Outcome != want || got.Record != record {
			t.Fatalf("observe %s at %d: %+v, %v; want %s with %+v", resource, epoch, got, err, want, record)
		}
		if after := b.state(t); want != leases.Accepted && after != before {
			t.Fatalf("a %s observe changed the store:\n%s\nbecame\n%s", want, before, after)
		}
	}
	observe("empty", 3, leases.Accepted, leases.Record{Epoch: 3})
	if got := mustWrite(t, b.fenced, "empty", 2, "late"); got.Outcome != leases.Stale {
		t.Fatalf("write below an observed fence: %s, want stale", got.Outcome)
	}
	mustWrite(t, b.fenced, "r", 1, "v1")
	observe("r", 2, leases.Accepted, leases.Record{Epoch: 2, ValueEpoch: 1, Value: "v1"})
	observe("r", 2, leases.Replay, leases.Record{Epoch: 2, ValueEpoch: 1, Value: "v1"})
	observe("r", 1, leases.Stale, leases.Record{Epoch: 2, ValueEpoch: 1, Value: "v1"})
	if got := mustWrite(t, b.fenced, "r", 1, "old"); got.Outcome != leases.Stale {
		t.Fatalf("write at epoch 1 after observe 2: %s, want stale", got.Outcome)
	}
	if got := mustWrite(t, b.fenced, "r", 2, "v2"); got.Outcome != leases.Accepted || got.Record != written(2, "v2") {
		t.Fatalf("first write at the observed epoch: %+v, want accepted", got)
	}
	if _, err := b.unfenced.Observe(ctx, "r", 3); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("observe on the unfenced receiver: %v, want ErrInvalidInput", err)
	}
}

// Without the comparison, whatever comes last wins. The unfenced receiver
// keeps its records apart: nothing written through it can lower the
// fenced receiver's fence.
func testUnfencedReceiverStoresWhateverComesLast(t *testing.T, b backend) {
	ctx := context.Background()
	mustWrite(t, b.fenced, "r", 5, "fenced")
	for _, w := range []struct {
		epoch int64
		value string
	}{{2, "new"}, {2, "another"}, {1, "old"}} {
		if got := mustWrite(t, b.unfenced, "r", w.epoch, w.value); got.Outcome != leases.Accepted || got.Record != written(w.epoch, w.value) {
			t.Fatalf("unfenced write epoch %d: %+v, want accepted and stored", w.epoch, got)
		}
	}
	if got, found, err := b.unfenced.Read(ctx, "r"); err != nil || !found || got != written(1, "old") {
		t.Fatalf("stored %+v, %v; want the last write (epoch 1, old)", got, err)
	}
	if got := mustWrite(t, b.fenced, "r", 4, "late"); got.Outcome != leases.Stale || got.Record != written(5, "fenced") {
		t.Fatalf("fenced write at epoch 4 after unfenced writes: %+v; want stale against epoch 5", got)
	}
	if _, err := b.fenced.Observe(ctx, "r", 9); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, b.unfenced, "r", 1, "lower")
	if got, _, err := b.fenced.Read(ctx, "r"); err != nil || got.Epoch != 9 {
		t.Fatalf("fenced record %+v, %v after an unfenced write; want the fence at 9", got, err)
	}
}

// A guarded write is accepted only while the writer's lease is the
// authority's live lease at the write's tick, and then as a fenced
// receiver would; every other outcome changes nothing.
func testGuardedReceiverOutcomes(t *testing.T, b backend) {
	ctx := context.Background()
	a, err := b.authority.Acquire(ctx, "r", "A", 10, 5) // live at ticks 10..14
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.authority.Acquire(ctx, "other", "A", 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	impostor := a
	impostor.Holder = "B"
	never := leaseOf("never-leased", "A", 1, 0, 100)
	steps := []struct {
		name    string
		held    leases.Lease
		now     int64
		value   string
		want    leases.Outcome
		record  leases.Record // reported and stored after the call
		wantErr error
	}{
		{"A's first write", a, 10, "a1", leases.Accepted, written(1, "a1"), nil},
		{"the same again: replay", a, 11, "a1", leases.Replay, written(1, "a1"), nil},
		{"another value at the same epoch: conflict", a, 12, "a2", leases.Conflict, written(1, "a1"), nil},
		{"the last live tick", a, 14, "a1", leases.Replay, written(1, "a1"), nil},
		{"at the expiry tick: not live", a, 15, "late", leases.NotLive, written(1, "a1"), nil},
		{"a holder that was never granted it", impostor, 12, "b", leases.NotLive, written(1, "a1"), nil},
		{"a resource never leased", never, 12, "x", leases.NotLive, leases.Record{}, nil},
		{"a tick before the lease's last change", other, 9, "x", "", leases.Record{}, leases.ErrTickBackwards},
	}
	for _, s := range steps {
		before := b.state(t)
		got, err := b.guarded.Write(ctx, s.held, s.now, s.value)
		if s.wantErr != nil {
			if !errors.Is(err, s.wantErr) {
				t.Fatalf("%s: %+v, %v; want %v", s.name, got, err, s.wantErr)
			}
		} else if err != nil || got.Outcome != s.want || got.Record != s.record {
			t.Fatalf("%s: %+v, %v; want %s with %+v", s.name, got, err, s.want, s.record)
		}
		if after := b.state(t); s.want != leases.Accepted && after != before {
			t.Fatalf("%s changed the store:\n%s\nbecame\n%s", s.name, before, after)
		}
	}
	// A new holder's lease supersedes A's, and B's write is accepted over
	// A's value; A is then not live however early its tick.
	bLease, err := b.authority.Acquire(ctx, "r", "B", 15, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.guarded.Write(ctx, bLease, 15, "b1"); err != nil || got.Outcome != leases.Accepted || got.Record != written(2, "b1") {
		t.Fatalf("B's write: %+v, %v; want accepted at epoch 2", got, err)
	}
	if got, err := b.guarded.Write(ctx, a, 15, "a-late"); err != nil || got.Outcome != leases.NotLive || got.Record != written(2, "b1") {
		t.Fatalf("A's write after B's grant: %+v, %v; want not-live", got, err)
	}
	if err := b.authority.Release(ctx, bLease, 16); err != nil {
		t.Fatal(err)
	}
	if got, err := b.guarded.Write(ctx, bLease, 16, "b2"); err != nil || got.Outcome != leases.NotLive {
		t.Fatalf("B's write after its release: %+v, %v; want not-live", got, err)
	}
	if got, found, err := b.guarded.Read(ctx, "r"); err != nil || !found || got != written(2, "b1") {
		t.Fatalf("guarded record %+v (found %v), %v; want B's epoch-2 value", got, found, err)
	}
	// The guarded records are apart from the fenced receiver's.
	if _, found, err := b.fenced.Read(ctx, "r"); err != nil || found {
		t.Fatalf("a guarded write showed in the fenced receiver: found %v, %v", found, err)
	}
}

// Bad input is refused with ErrInvalidInput in one line and changes
// nothing.
func testBadInputChangesNothing(t *testing.T, b backend) {
	ctx := context.Background()
	held, err := b.authority.Acquire(ctx, "r", "A", 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, b.fenced, "r", held.Epoch, "v")
	with := func(change func(*leases.Lease)) leases.Lease {
		l := held
		change(&l)
		return l
	}
	acquire := func(resource, holder string, now, ttl int64) func() error {
		return func() error { _, err := b.authority.Acquire(ctx, resource, holder, now, ttl); return err }
	}
	write := func(r leases.Receiver, resource string, epoch int64, value string) func() error {
		return func() error { _, err := r.Write(ctx, resource, epoch, value); return err }
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"acquire: empty resource", acquire("", "B", 20, 1)},
		{"acquire: empty holder", acquire("r", "", 20, 1)},
		{"acquire: zero ttl", acquire("r", "B", 20, 0)},
		{"acquire: negative tick", acquire("other", "B", -1, 1)},
		{"acquire: tick before the last change", acquire("r", "B", 4, 1)},
		{"acquire: expiry overflows", acquire("r", "B", 20, math.MaxInt64)},
		{"acquire: NUL in a name", acquire("r\x00x", "B", 20, 1)},
		{"acquire: invalid UTF-8", acquire("r\xff", "B", 20, 1)},
		{"acquire: name too long", acquire(strings.Repeat("r", leases.MaxNameBytes+1), "B", 20, 1)},
		{"renew: epoch 0", func() error {
			_, err := b.authority.Renew(ctx, with(func(l *leases.Lease) { l.Epoch = 0 }), 6, 1)
			return err
		}},
		{"renew: zero ttl", func() error { _, err := b.authority.Renew(ctx, held, 6, 0); return err }},
		{"renew: tick before the last change", func() error { _, err := b.authority.Renew(ctx, held, 4, 1); return err }},
		{"release: negative epoch", func() error { return b.authority.Release(ctx, with(func(l *leases.Lease) { l.Epoch = -1 }), 6) }},
		{"release: tick before the last change", func() error { return b.authority.Release(ctx, held, 4) }},
		{"write: epoch 0", write(b.fenced, "r", 0, "x")},
		{"write: empty resource", write(b.fenced, "", 2, "x")},
		{"write: value too long", write(b.fenced, "r", 2, strings.Repeat("x", leases.MaxValueBytes+1))},
		{"write: unknown receiver mode", write(b.receiver("half-fenced"), "r", 2, "x")},
		{"unfenced write: epoch 0", write(b.unfenced, "r", 0, "x")},
		{"observe: epoch 0", func() error { _, err := b.fenced.Observe(ctx, "r", 0); return err }},
		{"read: empty resource", func() error { _, _, err := b.fenced.Read(ctx, ""); return err }},
		{"guarded write: epoch 0", func() error {
			_, err := b.guarded.Write(ctx, with(func(l *leases.Lease) { l.Epoch = 0 }), 6, "x")
			return err
		}},
		{"guarded write: value too long", func() error {
			_, err := b.guarded.Write(ctx, held, 6, strings.Repeat("x", leases.MaxValueBytes+1))
			return err
		}},
		{"guarded read: NUL in a name", func() error { _, _, err := b.guarded.Read(ctx, "r\x00"); return err }},
	}
	before := b.state(t)
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if !errors.Is(err, leases.ErrInvalidInput) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v; want one line matching ErrInvalidInput", err)
			}
			if after := b.state(t); after != before {
				t.Fatalf("the store changed:\n%s\nbecame\n%s", before, after)
			}
		})
	}
}
