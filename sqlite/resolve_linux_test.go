package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"leases"
	"leases/internal/roles"
	"leases/sqlite"
	"leases/testkit/childtest"
	"leases/testkit/sqlitetest"
	"leases/testkit/stracetest"
	"leases/testkit/testctx"
)

// resolverRole is this test binary re-executed as a tenure's holder,
// whose commit the test makes fail with strace.
var resolverRole = roles.Register("sqlite-test-resolver", playResolver)

// resolverResult is what the resolver's transaction and its Resolve
// answered.
type resolverResult struct {
	TxErr, ResolveErr  string
	Unknown, Committed bool
}

// A commit whose fsync of the log fails has its frames in the log file,
// never indexed: the failing process's Tx says the outcome is unknown,
// and its tenure's Resolve, reading the file on a connection of its own,
// answers "not committed". That answer must hold for good: the process is
// then killed (no close, no checkpoint), and a store that opens the file
// afresh, with no process holding it (so that SQLite recovers the index
// from the log), must not find the row. Resolve makes its answer final by
// writing the fence row: its frames take the place of the failed
// commit's, which a recovery can then no longer bring back (without that
// write, TestFailedCommitIsAnUnknownOutcome shows, it does).
func TestResolveAnswerHoldsAfterRecovery(t *testing.T) {
	resolverRole.MaySkip() // stracetest skips before the role starts where strace cannot run
	stracetest.Path(t)
	ctx := testctx.Context(t)
	path := sqlitetest.Path(t)
	setup := sqlitetest.Open(t, path)
	if err := setup.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE invoices (job TEXT, epoch INTEGER)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Closed, the file has no log: the resolver's own first writes make
	// it, and the first fsync after strace attaches is its commit's.
	if err := setup.Close(); err != nil {
		t.Fatal(err)
	}
	result := runResolver(t, ctx, path)
	t.Logf("the transaction: %s; Resolve: committed=%v, %v", result.TxErr, result.Committed, result.ResolveErr)
	if !result.Unknown {
		t.Fatalf("the transaction whose fsync failed: %s; want an unknown outcome", result.TxErr)
	}
	if result.ResolveErr != "" || result.Committed {
		t.Fatalf("Resolve answered committed=%v, %s; want not committed", result.Committed, result.ResolveErr)
	}
	after := sqlitetest.Open(t, path)
	var n int
	if err := after.Tx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM invoices`).Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("after the resolver's death the file's recovery holds %d invoice rows: Resolve answered not committed, and it committed", n)
	}
	if check, err := after.IntegrityCheck(ctx); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
}

// runResolver runs the resolver on path: once its tenure has begun,
// strace attaches and fails the first fsync of the file's log, the
// resolver runs its transaction and resolves it, and then it is killed.
// It returns what the resolver reported, once no process holds the file.
func runResolver(t *testing.T, ctx context.Context, path string) resolverResult {
	t.Helper()
	child := childtest.Start(t, resolverRole, path, strconv.FormatInt(testctx.Bound(t).Milliseconds(), 10))
	if !child.Lines.Scan() || child.Lines.Text() != "ready" {
		t.Fatalf("the resolver did not begin its tenure: %q, %v", child.Lines.Text(), child.Lines.Err())
	}
	attachStrace(t, ctx, child.Pid(), "-P", path+"-wal", "-e", "trace=fsync", "-e", "inject=fsync:error=EIO:when=1")
	if _, err := io.WriteString(child.In, "go\n"); err != nil {
		t.Fatal(err)
	}
	var result resolverResult
	if !child.Lines.Scan() {
		t.Fatalf("the resolver said nothing: %v", child.Lines.Err())
	}
	if err := json.Unmarshal(child.Lines.Bytes(), &result); err != nil {
		t.Fatalf("the resolver said %q", child.Lines.Text())
	}
	child.Kill() // SIGKILL: no close, no checkpoint
	return result
}

// playResolver is the resolver process: it opens a store on the file
// args[0], acquires a lease for args[1] milliseconds and begins its
// tenure, says "ready" and waits for a line; then it runs one
// transaction of the tenure that inserts an invoice row, resolves it if
// its outcome is unknown, reports both as JSON and waits to be killed.
// Its database calls stay on one OS thread, where strace counts the
// fsyncs (the failing commit's is the first, Resolve's the next).
func playResolver(args []string) int {
	runtime.LockOSThread()
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "resolver: want the file and the lease's TTL in milliseconds")
		return 2
	}
	ttl, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "resolver:", err)
		return 2
	}
	ctx := context.Background()
	store, err := sqlite.Open(ctx, args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "resolver:", err)
		return 1
	}
	lease, err := store.Lessor().Acquire(ctx, "invoice-7", "R", time.Duration(ttl)*time.Millisecond)
	if err != nil {
		fmt.Fprintln(os.Stderr, "resolver:", err)
		return 1
	}
	tenure, err := store.Tenure(ctx, lease)
	if err != nil {
		fmt.Fprintln(os.Stderr, "resolver:", err)
		return 1
	}
	in := bufio.NewReader(os.Stdin)
	fmt.Println("ready")
	if _, err := in.ReadString('\n'); err != nil {
		return 1
	}
	txErr := tenure.Tx(ctx, nil, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO invoices VALUES ('invoice-7', ?)`, lease.Epoch)
		return err
	})
	result := resolverResult{TxErr: fmt.Sprint(txErr), Unknown: errors.Is(txErr, leases.ErrOutcomeUnknown)}
	if result.Unknown {
		committed, err := tenure.Resolve(ctx, txErr)
		result.Committed = committed
		if err != nil {
			result.ResolveErr = err.Error()
		}
	}
	line, _ := json.Marshal(result)
	fmt.Println(string(line))
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed: the store is never closed
	return 0
}
