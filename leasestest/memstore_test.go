package leasestest_test

// The in-memory backend's store: an authority and receivers kept in maps,
// written against package leases' exported names alone, as a backend
// outside this repository is (memory_test.go runs the suite on it).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"leases"
)

// flaws are the rules a broken memory backend flips.
type flaws struct {
	reuseEpochs    bool // a release forgets the resource's epoch, so that the next grant starts again at 1
	expiryLate     bool // a lease is live one tick past its expiry, at t+d too
	acceptStale    bool // the fenced receiver stores a write of a lower epoch
	refusalWrites  bool // a refused acquire moves the lease's last tick
	tenureApart    bool // each tenure on a fence table of its own, blind to newer ones
	guardedForgets bool // the guarded receiver accepts a write of a lease that expired
}

// row is the authority's record of one resource: its last lease (its
// epoch kept after a release), whether it is held, and the tick of the
// last change.
type row struct {
	lease leases.Lease
	held  bool
	last  int64
}

// memory is the backend: its authority, its three receivers' records,
// and the waiters on changes, under one lock; writes counts every change,
// so that its state shows a rewrite of an unchanged value too.
type memory struct {
	flaws
	mu      sync.Mutex
	rows    map[string]row
	records map[leases.Mode]map[string]leases.Record
	guarded map[string]leases.Record
	waiters map[string][]chan struct{}
	writes  int
}

func newMemory(f flaws) *memory {
	return &memory{
		flaws:   f,
		rows:    map[string]row{},
		records: map[leases.Mode]map[string]leases.Record{leases.Fenced: {}, leases.Unfenced: {}},
		guarded: map[string]leases.Record{},
		waiters: map[string][]chan struct{}{},
	}
}

// first is the first error of errs that is not nil.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{leases.ErrInvalidInput}, args...)...)
}

// checkName is the one rule for names (leases.MaxNameBytes).
func checkName(kind, s string) error {
	switch {
	case s == "" || len(s) > leases.MaxNameBytes || !utf8.ValidString(s):
		return invalid("%s %q is empty, too long or not UTF-8", kind, s)
	case strings.TrimSpace(s) == "":
		return invalid("%s %q is only white space", kind, s)
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }) >= 0:
		return invalid("%s %q has a control character", kind, s)
	}
	return nil
}

func checkLease(l leases.Lease) error {
	if l.Epoch < 1 {
		return invalid("epoch %d is below 1", l.Epoch)
	}
	return first(checkName("resource", l.Resource), checkName("holder", l.Holder))
}

func checkTicks(now, ttl int64) error {
	if now < 0 || ttl < 1 || now > (1<<62) || ttl > (1<<62) {
		return invalid("tick %d or time-to-live %d out of range", now, ttl)
	}
	return nil
}

// changed records a change to resource and wakes its waiters; m.mu is
// held.
func (m *memory) changed(resource string) {
	m.writes++
	for _, w := range m.waiters[resource] {
		close(w)
	}
	delete(m.waiters, resource)
}

// live is whether r's lease is live at now.
func (m *memory) live(r row, now int64) bool {
	if m.expiryLate {
		return r.held && now <= r.lease.ExpiresAt
	}
	return r.held && now < r.lease.ExpiresAt
}

func (m *memory) Acquire(ctx context.Context, resource, holder string, now, ttl int64) (leases.Lease, error) {
	if err := first(checkName("resource", resource), checkName("holder", holder), checkTicks(now, ttl)); err != nil {
		return leases.Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rows[resource]
	if now < r.last {
		return leases.Lease{}, &leases.BackwardsError{Resource: resource, Tick: now, Last: r.last}
	}
	if m.live(r, now) {
		if m.refusalWrites {
			r.last = now
			m.rows[resource] = r
		}
		return leases.Lease{}, &leases.HeldError{Live: r.lease, At: now}
	}
	lease := leases.Lease{Resource: resource, Holder: holder, Epoch: r.lease.Epoch + 1, GrantedAt: now, ExpiresAt: now + ttl}
	m.rows[resource] = row{lease: lease, held: true, last: now}
	m.changed(resource)
	return lease, nil
}

// holding is the row of held's resource when held is its live lease at
// now; the refusal otherwise. m.mu is held.
func (m *memory) holding(held leases.Lease, now int64) (row, error) {
	r, ok := m.rows[held.Resource]
	switch {
	case ok && now < r.last:
		return r, &leases.BackwardsError{Resource: held.Resource, Tick: now, Last: r.last}
	case !r.held || r.lease.Epoch != held.Epoch || r.lease.Holder != held.Holder:
		return r, fmt.Errorf("%w: %q holds no lease of %q at epoch %d", leases.ErrNotHolder, held.Holder, held.Resource, held.Epoch)
	case !m.live(r, now):
		return r, fmt.Errorf("%w: %q's lease of %q ended at tick %d", leases.ErrLeaseExpired, held.Holder, held.Resource, r.lease.ExpiresAt)
	}
	return r, nil
}

func (m *memory) Renew(ctx context.Context, held leases.Lease, now, ttl int64) (leases.Lease, error) {
	if err := first(checkLease(held), checkTicks(now, ttl)); err != nil {
		return leases.Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.holding(held, now)
	if err != nil {
		return leases.Lease{}, err
	}
	r.lease.ExpiresAt, r.last = max(r.lease.ExpiresAt, now+ttl), now
	m.rows[held.Resource] = r
	m.changed(held.Resource)
	return r.lease, nil
}

func (m *memory) Release(ctx context.Context, held leases.Lease, now int64) error {
	if err := first(checkLease(held), checkTicks(now, 1)); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.holding(held, now)
	if err != nil {
		return err
	}
	r.held, r.last = false, now
	if m.reuseEpochs {
		r.lease.Epoch = 0
	}
	m.rows[held.Resource] = r
	m.changed(held.Resource)
	return nil
}

func (m *memory) Lease(ctx context.Context, resource string, now int64) (leases.Lease, bool, error) {
	live, err := m.Live(ctx, now, resource)
	if err != nil || len(live) == 0 {
		return leases.Lease{}, false, err
	}
	return live[0], true, nil
}

func (m *memory) Live(ctx context.Context, now int64, resources ...string) ([]leases.Lease, error) {
	if err := checkTicks(now, 1); err != nil {
		return nil, err
	}
	for _, r := range resources {
		if err := checkName("resource", r); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var live []leases.Lease
	for resource, r := range m.rows {
		if m.live(r, now) && now >= r.lease.GrantedAt && (len(resources) == 0 || slices.Contains(resources, resource)) {
			live = append(live, r.lease)
		}
	}
	slices.SortFunc(live, func(a, b leases.Lease) int { return strings.Compare(a.Resource, b.Resource) })
	return live, nil
}

func (m *memory) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	if err := checkName("resource", resource); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	w := make(chan struct{})
	m.waiters[resource] = append(m.waiters[resource], w)
	return w, nil
}

// receiver is one of the memory's receivers.
type receiver struct {
	m    *memory
	mode leases.Mode
}

func (r receiver) Mode() leases.Mode { return r.mode }

func checkWrite(resource string, epoch int64, value string) error {
	if epoch < 1 {
		return invalid("epoch %d is below 1", epoch)
	}
	if len(value) > leases.MaxValueBytes {
		return invalid("value of %d bytes", len(value))
	}
	return checkName("resource", resource)
}

// fenced is the fenced receiver's rule on records at epoch with value:
// the outcome, and the record it leaves.
func (m *memory) fenced(records map[string]leases.Record, resource string, epoch int64, value string) leases.WriteResult {
	rec, found := records[resource]
	switch {
	case !found || epoch > rec.Epoch || (epoch == rec.Epoch && rec.ValueEpoch < epoch) || (m.acceptStale && epoch < rec.Epoch):
		rec = leases.Record{Epoch: epoch, ValueEpoch: epoch, Value: value}
		records[resource] = rec
		m.writes++
		return leases.WriteResult{Outcome: leases.Accepted, Record: rec}
	case epoch < rec.Epoch:
		return leases.WriteResult{Outcome: leases.Stale, Record: rec}
	case rec.Value == value:
		return leases.WriteResult{Outcome: leases.Replay, Record: rec}
	}
	return leases.WriteResult{Outcome: leases.Conflict, Record: rec}
}

func (r receiver) Write(ctx context.Context, resource string, epoch int64, value string) (leases.WriteResult, error) {
	if err := checkWrite(resource, epoch, value); err != nil {
		return leases.WriteResult{}, err
	}
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	records := r.m.records[r.mode]
	if r.mode == leases.Unfenced {
		records[resource] = leases.Record{Epoch: epoch, ValueEpoch: epoch, Value: value}
		r.m.writes++
		return leases.WriteResult{Outcome: leases.Accepted, Record: records[resource]}, nil
	}
	return r.m.fenced(records, resource, epoch, value), nil
}

func (r receiver) Fence(ctx context.Context, resource string, epoch int64) (leases.WriteResult, error) {
	if err := checkWrite(resource, epoch, ""); err != nil {
		return leases.WriteResult{}, err
	}
	if r.mode != leases.Fenced {
		return leases.WriteResult{}, invalid("an %s receiver has no fence", r.mode)
	}
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	rec, found := r.m.records[r.mode][resource]
	switch {
	case !found || epoch > rec.Epoch:
		rec.Epoch = epoch
		r.m.records[r.mode][resource] = rec
		r.m.writes++
		return leases.WriteResult{Outcome: leases.Accepted, Record: rec}, nil
	case epoch < rec.Epoch:
		return leases.WriteResult{Outcome: leases.Stale, Record: rec}, nil
	}
	return leases.WriteResult{Outcome: leases.Replay, Record: rec}, nil
}

func (r receiver) Read(ctx context.Context, resource string) (leases.Record, bool, error) {
	if err := checkName("resource", resource); err != nil {
		return leases.Record{}, false, err
	}
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	rec, found := r.m.records[r.mode][resource]
	return rec, found, nil
}

// guardedReceiver is the memory's guarded receiver.
type guardedReceiver struct{ m *memory }

func (g guardedReceiver) Write(ctx context.Context, held leases.Lease, now int64, value string) (leases.WriteResult, error) {
	if err := first(checkLease(held), checkWrite(held.Resource, held.Epoch, value), checkTicks(now, 1)); err != nil {
		return leases.WriteResult{}, err
	}
	g.m.mu.Lock()
	defer g.m.mu.Unlock()
	_, err := g.m.holding(held, now)
	if errors.Is(err, leases.ErrTickBackwards) {
		return leases.WriteResult{}, err
	}
	if err != nil && !(g.m.guardedForgets && errors.Is(err, leases.ErrLeaseExpired)) {
		return leases.WriteResult{Outcome: leases.NotLive, Record: g.m.guarded[held.Resource]}, nil
	}
	return g.m.fenced(g.m.guarded, held.Resource, held.Epoch, value), nil
}

func (g guardedReceiver) Read(ctx context.Context, resource string) (leases.Record, bool, error) {
	if err := checkName("resource", resource); err != nil {
		return leases.Record{}, false, err
	}
	g.m.mu.Lock()
	defer g.m.mu.Unlock()
	rec, found := g.m.guarded[resource]
	return rec, found, nil
}

// state renders everything the memory holds.
func (m *memory) state() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out strings.Builder
	fmt.Fprintf(&out, "%d writes\n", m.writes)
	for _, resource := range slices.Sorted(maps.Keys(m.rows)) {
		fmt.Fprintf(&out, "authority %q %+v\n", resource, m.rows[resource])
	}
	for _, mode := range []leases.Mode{leases.Fenced, leases.Unfenced} {
		for _, resource := range slices.Sorted(maps.Keys(m.records[mode])) {
			fmt.Fprintf(&out, "%s %q %+v\n", mode, resource, m.records[mode][resource])
		}
	}
	for _, resource := range slices.Sorted(maps.Keys(m.guarded)) {
		fmt.Fprintf(&out, "guarded %q %+v\n", resource, m.guarded[resource])
	}
	return out.String()
}
