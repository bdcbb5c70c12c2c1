package postgres_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"leases"
	"leases/internal/roles"
	"leases/internal/stopwait"
	"leases/postgres"
	"leases/postgres/pgtest"
	"leases/testkit/childtest"
	"leases/testkit/fencetest"
)

// holderRole is this test binary re-executed as a lease holder of its
// own process, for the test to stop with SIGSTOP.
var holderRole = roles.Register("postgres-test-holder", playHolder)

// holderJob is what the holder process is told to do.
type holderJob struct {
	DSN, Prefix string
	Lease       leases.Lease
	// Stop is where the holder reports and waits to be stopped:
	// "between" its statements and its COMMIT, or "at-commit", just
	// before its COMMIT leaves for the server.
	Stop string
}

// holderResult is what the holder's transaction returned.
type holderResult struct {
	Err                                string
	NotLive, Expired, Refusal, Unknown bool
}

// A holder stopped (SIGSTOP) in its transaction, past its lease's expiry
// on the server's clock, and then continued, commits nothing: neither
// stopped between its statements and its COMMIT nor just as its COMMIT
// goes out. The check at the commit runs in the server, whatever the
// holder's process did, and refuses the COMMIT; the error says why, and
// it is a refusal, not an unknown outcome. (Without the check, the
// chaos test found rows committed up to 1.3 s after their lease's
// expiry.)
func TestStoppedHolderCommitsNothingAfterItsExpiry(t *testing.T) {
	for _, stop := range []string{"between", "at-commit"} {
		t.Run(stop, func(t *testing.T) {
			ctx := fencetest.Context(t)
			db := database(t, 0)
			store := newStore(t, db.DB, postgres.Options{})
			fences := storeFence(t, db, store)
			resource := t.Name()
			// The holder must reach its stop while the lease lives: on a
			// loaded machine 200 ms may not be enough (the process must
			// start), and then the round starts again with a lease twice
			// as long, once the old one has run out.
			for ttl := 200 * time.Millisecond; ; ttl *= 2 {
				lease, err := store.Lessor().Acquire(ctx, resource, "A", ttl)
				if err != nil {
					t.Fatal(err)
				}
				job := holderJob{DSN: pgtest.Shared(t).DSN("postgres"), Prefix: strings.TrimSuffix(store.Tables()[0], "authority"),
					Lease: lease, Stop: stop}
				result, reached := runStoppedHolder(t, db.DB, job)
				if !reached {
					if !result.NotLive {
						t.Fatalf("the holder failed before its stop: %s", result.Err)
					}
					awaitServerClock(t, db.DB, lease.ExpiresAt)
					continue
				}
				t.Logf("the holder's transaction: %s", result.Err)
				if !result.NotLive || !result.Expired || !result.Refusal || result.Unknown {
					t.Fatalf("the holder's COMMIT after its lease's expiry: %s; want a refusal matching ErrNotLive and ErrLeaseExpired", result.Err)
				}
				if !strings.Contains(result.Err, "before the commit") {
					t.Errorf("the error does not say when the lease expired: %s", result.Err)
				}
				if rows := fencetest.BusinessRows(t, db, fences, resource); len(rows) != 0 {
					t.Fatalf("the stopped holder's rows committed: %q", rows)
				}
				return
			}
		})
	}
}

// runStoppedHolder runs a holder process on job: once it reports its
// stop, it is stopped with SIGSTOP until the lease has expired on the
// server's clock, continued, and let go on. Reached is false when the
// holder ended before its stop (its lease had run out first).
func runStoppedHolder(t *testing.T, db *sql.DB, job holderJob) (result holderResult, reached bool) {
	t.Helper()
	arg, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	child := childtest.Start(t, holderRole, string(arg))
	defer func() { _ = child.Wait() }()
	cmd, in, lines := child.Cmd, child.In, child.Lines
	if !lines.Scan() {
		t.Fatalf("the holder said nothing: %v", lines.Err())
	}
	if line := lines.Text(); line != job.Stop {
		if err := json.Unmarshal([]byte(line), &result); err != nil {
			t.Fatalf("the holder said %q", line)
		}
		return result, false
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := stopwait.Stopped(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	awaitServerClock(t, db, job.Lease.ExpiresAt+1)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(in, "go\n"); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() {
		t.Fatalf("the holder said nothing after its stop: %v", lines.Err())
	}
	if err := json.Unmarshal(lines.Bytes(), &result); err != nil {
		t.Fatalf("the holder said %q", lines.Text())
	}
	return result, true
}

// playHolder is the holder process: one transaction of a tenure of the
// lease it is given, which inserts a business row, with a stop where it
// is told to (it reports the stop on stdout and waits for a line on
// stdin); then it writes what the transaction returned.
func playHolder(args []string) int {
	var job holderJob
	if len(args) != 1 || json.Unmarshal([]byte(args[0]), &job) != nil {
		fmt.Fprintln(os.Stderr, "holder: want one argument, the job as JSON")
		return 2
	}
	ctx := context.Background()
	in := bufio.NewReader(os.Stdin)
	stop := func() {
		fmt.Println(job.Stop)
		_, _ = in.ReadString('\n')
	}
	config, err := pgx.ParseConfig(job.DSN)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	var armed atomic.Bool
	config.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil || job.Stop != "at-commit" {
			return conn, err
		}
		return &stopBeforeCommit{Conn: conn, armed: &armed, stop: stop}, nil
	}
	db := stdlib.OpenDB(*config)
	defer db.Close()
	store, err := postgres.New(db, postgres.Options{Prefix: job.Prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	tenure, err := store.Tenure(ctx, job.Lease)
	if err == nil {
		err = tenure.Tx(ctx, nil, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO "`+job.Prefix+`fence_business" (resource, epoch, value, writer) VALUES ($1, $2, 'late', 1)`,
				job.Lease.Resource, job.Lease.Epoch); err != nil {
				return err
			}
			if job.Stop == "between" {
				stop()
			}
			armed.Store(true)
			return nil
		})
	}
	result := holderResult{NotLive: errors.Is(err, leases.ErrNotLive), Expired: errors.Is(err, leases.ErrLeaseExpired),
		Refusal: leases.IsRefusal(err), Unknown: errors.Is(err, leases.ErrOutcomeUnknown)}
	if err != nil {
		result.Err = err.Error()
	}
	line, _ := json.Marshal(result)
	fmt.Println(string(line))
	return 0
}

// stopBeforeCommit is a connection that, once armed, stops before it
// writes a COMMIT.
type stopBeforeCommit struct {
	net.Conn
	armed *atomic.Bool
	stop  func()
}

func (c *stopBeforeCommit) Write(p []byte) (int, error) {
	if c.armed.Load() && bytes.Contains(bytes.ToLower(p), []byte("commit")) {
		c.armed.Store(false)
		c.stop()
	}
	return c.Conn.Write(p)
}
