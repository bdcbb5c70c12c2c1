package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/fence"
	"leases/sqlite"
	"leases/testkit/testctx"
)

// tenureFile is a leases file of the test's own, opened twice (as two
// processes would) on one manual host clock, with a business table.
type tenureFile struct {
	ctx          context.Context
	host         *clock.Manual
	store, other *sqlite.Store
}

func openTenureFile(t *testing.T) tenureFile {
	t.Helper()
	ctx := testctx.Context(t)
	path := filepath.Join(t.TempDir(), "leases.db")
	f := tenureFile{ctx: ctx, host: clock.NewManual(1_000)}
	open := func() *sqlite.Store {
		s, err := sqlite.Options{Clock: f.host}.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	f.store, f.other = open(), open()
	if err := f.store.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE invoices (job TEXT, epoch INTEGER)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return f
}

// insert is a tenure's transaction that stores one invoice row, with
// between run between the statement and the COMMIT.
func (f tenureFile) insert(tn *fence.Tenure, between func()) error {
	return tn.Tx(f.ctx, nil, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(f.ctx, `INSERT INTO invoices VALUES ('invoice-7', ?)`, tn.Epoch()); err != nil {
			return err
		}
		between()
		return nil
	})
}

func (f tenureFile) rows(t *testing.T) []int64 {
	t.Helper()
	var epochs []int64
	if err := f.other.Tx(f.ctx, func(tx *sql.Tx) error {
		r, err := tx.QueryContext(f.ctx, `SELECT epoch FROM invoices ORDER BY rowid`)
		if err != nil {
			return err
		}
		defer r.Close()
		for r.Next() {
			var e int64
			if err := r.Scan(&e); err != nil {
				return err
			}
			epochs = append(epochs, e)
		}
		return r.Err()
	}); err != nil {
		t.Fatal(err)
	}
	return epochs
}

// A store's tenure admits a transaction only while the lease is live on
// the host's clock and its epoch the newest the store's fence has seen,
// and refuses with errors that say which, each a refusal.
func TestTenureOutcomes(t *testing.T) {
	f := openTenureFile(t)
	nothing := func() {}
	refused := func(tn *fence.Tenure, want ...error) {
		t.Helper()
		ran := false
		err := f.insert(tn, func() { ran = true })
		if ran {
			t.Errorf("a transaction of %+v ran its function; the admission must refuse first", tn.Lease())
		}
		for _, w := range want {
			if !errors.Is(err, w) {
				t.Fatalf("a transaction of %+v: %v; want %v", tn.Lease(), err, want)
			}
		}
		if !leases.IsRefusal(err) || errors.Is(err, leases.ErrOutcomeUnknown) {
			t.Fatalf("a transaction of %+v: %v is no refusal", tn.Lease(), err)
		}
	}
	a, err := f.store.Lessor().Acquire(f.ctx, "invoice-7", "A", 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	tenureA, err := f.store.Tenure(f.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.insert(tenureA, nothing); err != nil {
		t.Fatal(err)
	}
	if err := f.host.Advance(a.ExpiresAt); err != nil {
		t.Fatal(err)
	}
	refused(tenureA, leases.ErrNotLive, leases.ErrLeaseExpired)
	if _, err := f.store.Tenure(f.ctx, a); !errors.Is(err, leases.ErrNotLive) {
		t.Fatalf("a tenure begun at the expiry: %v; want ErrNotLive", err)
	}
	b, err := f.other.Lessor().Acquire(f.ctx, "invoice-7", "B", 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	refused(tenureA, leases.ErrNotLive, leases.ErrNotHolder)
	tenureB, err := f.other.Tenure(f.ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.other.Lessor().Release(f.ctx, b); err != nil {
		t.Fatal(err)
	}
	refused(tenureB, leases.ErrNotLive, leases.ErrNotHolder)
	bad := b
	bad.Epoch = 0
	if _, err := f.store.Tenure(f.ctx, bad); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("epoch 0: %v; want ErrInvalidInput", err)
	}
	if got := f.rows(t); !slices.Equal(got, []int64{a.Epoch}) {
		t.Fatalf("rows of epochs %v; want A's one", got)
	}
}

// A holder whose lease expires between its statements and its COMMIT (a
// process stopped there, a long call) commits nothing: the check at the
// commit refuses it, the error says so and is a refusal (not an unknown
// outcome), and the store goes on. A transaction whose COMMIT comes while
// the lease lives commits.
func TestCommitAfterTheExpiryCommitsNothing(t *testing.T) {
	f := openTenureFile(t)
	a, err := f.store.Lessor().Acquire(f.ctx, "invoice-7", "A", 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	tenure, err := f.store.Tenure(f.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	advance := func(tick int64) func() {
		return func() {
			if err := f.host.Advance(tick); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.insert(tenure, advance(a.ExpiresAt-1)); err != nil {
		t.Fatalf("a COMMIT one tick before the expiry: %v", err)
	}
	err = f.insert(tenure, advance(a.ExpiresAt))
	if !errors.Is(err, leases.ErrNotLive) || !errors.Is(err, leases.ErrLeaseExpired) || !leases.IsRefusal(err) ||
		errors.Is(err, leases.ErrOutcomeUnknown) {
		t.Fatalf("a COMMIT at the expiry: %v; want a refusal matching ErrNotLive and ErrLeaseExpired", err)
	}
	t.Logf("a COMMIT at the expiry: %v", err)
	if got := f.rows(t); !slices.Equal(got, []int64{a.Epoch}) {
		t.Fatalf("rows of epochs %v; want the one committed before the expiry", got)
	}
	// The refusal was known, not an unknown outcome: the store goes on.
	if _, err := f.store.Lessor().Acquire(f.ctx, "invoice-7", "B", 10*time.Millisecond); err != nil {
		t.Fatalf("the next acquire through the same store: %v", err)
	}
}

// A holder paused inside its transaction, past its lease's expiry, holds
// the file's write lock: the next grant waits for it, and its COMMIT, when
// it comes, is refused by the check at the commit. Nothing of the paused
// holder commits after its expiry, the next holder is granted only after
// the paused transaction ended, and the business rows' epochs never go
// down in commit order.
func TestPausedHolderInTheLeasesFile(t *testing.T) {
	f := openTenureFile(t)
	a, err := f.store.Lessor().Acquire(f.ctx, "invoice-7", "A", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	tenureA, err := f.store.Tenure(f.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.insert(tenureA, func() {}); err != nil {
		t.Fatalf("A while its lease lives: %v", err)
	}
	// A pauses inside its next transaction, past its lease's expiry; B
	// asks for the lease meanwhile, through another connection.
	inside, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- f.insert(tenureA, func() { close(inside); <-resume }) }()
	<-inside
	if err := f.host.Advance(a.ExpiresAt + 100); err != nil {
		t.Fatal(err)
	}
	granted := make(chan leases.Lease, 1)
	go func() {
		b, err := f.other.Lessor().Acquire(f.ctx, "invoice-7", "B", 100*time.Millisecond)
		if err != nil {
			t.Error(err)
		}
		granted <- b
	}()
	close(resume) // B's grant waits for the file's write lock, which A's transaction holds
	if err := <-done; !errors.Is(err, leases.ErrNotLive) || !errors.Is(err, leases.ErrLeaseExpired) {
		t.Fatalf("A's paused transaction, past its expiry: %v; want refused at the commit", err)
	}
	b := <-granted
	if b.Epoch != 2 {
		t.Fatalf("B: %+v; want epoch 2", b)
	}
	tenureB, err := f.other.Tenure(f.ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.insert(tenureA, func() {}); !errors.Is(err, leases.ErrNotLive) {
		t.Fatalf("A after B's grant: %v; want not live", err)
	}
	if err := f.insert(tenureB, func() {}); err != nil {
		t.Fatalf("B: %v", err)
	}
	if got := f.rows(t); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("rows at epochs %v; want A's one, then B's: epochs never go down in commit order", got)
	}
	if err := f.store.Tx(f.ctx, func(*sql.Tx) error { return errors.New("no") }); err == nil {
		t.Fatal("a failing Tx committed")
	}
}
