package experiment

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"leases"
	"leases/sqlite"
)

// RunWorkerIfRequested turns this process into a worker and exits, when the
// controller started it as one; otherwise it returns at once. Call it first
// thing in main and in TestMain: the command and the test binary re-execute
// themselves to play the worker role.
func RunWorkerIfRequested() {
	runEchoIfRequested()
	dbPath, ok := os.LookupEnv(workerEnv)
	if !ok {
		return
	}
	os.Exit(runWorker(context.Background(), dbPath, os.Stdin, os.Stdout, os.Stderr))
}

// runWorker serves as a worker and returns its exit status. A worker that
// exits early says why as its last line on stderr, which the controller
// quotes when it reports the worker's end.
func runWorker(ctx context.Context, dbPath string, in io.Reader, out, stderr io.Writer) int {
	if err := serveWorker(ctx, dbPath, in, out); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// serveWorker opens its own connection to the database, announces its pid,
// then performs one request per input line. It returns when told to exit or
// when its input ends: a controller that is gone leaves no worker behind.
// Its error says why the worker exits early; the worker prints it as its
// last line on stderr.
func serveWorker(ctx context.Context, dbPath string, in io.Reader, out io.Writer) (err error) {
	enc := json.NewEncoder(out)
	store, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		_ = enc.Encode(reply{Error: err.Error()})
		return err
	}
	defer func() {
		if closeErr := store.Close(); err == nil && closeErr != nil {
			err = fmt.Errorf("closing the database: %w", closeErr)
		}
	}()
	if err := enc.Encode(reply{PID: os.Getpid()}); err != nil {
		return fmt.Errorf("announcing its pid: %w", err)
	}
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lines.Scan() {
		var req request
		if err := json.Unmarshal(lines.Bytes(), &req); err != nil {
			err = fmt.Errorf("garbled request: %w", err)
			_ = enc.Encode(reply{Error: err.Error()})
			return err
		}
		if req.Op == opExit {
			if err := enc.Encode(reply{}); err != nil {
				return fmt.Errorf("writing a reply: %w", err)
			}
			return nil
		}
		if err := enc.Encode(perform(ctx, store, req)); err != nil {
			return fmt.Errorf("writing a reply: %w", err)
		}
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("reading a request: %w", err)
	}
	return nil
}

func perform(ctx context.Context, store *sqlite.Store, req request) reply {
	switch req.Op {
	case opAcquire:
		lease, err := store.Authority().Acquire(ctx, req.Resource, req.Holder, req.Tick, req.TTL)
		return replyFor(&lease, err)
	case opWrite:
		result, err := store.Receiver(req.Receiver).Write(ctx, req.Resource, req.Epoch, req.Value)
		if err != nil {
			return reply{Error: err.Error()}
		}
		return reply{Write: &result}
	case opObserve:
		result, err := store.Receiver(leases.Fenced).Observe(ctx, req.Resource, req.Epoch)
		if err != nil {
			return reply{Error: err.Error()}
		}
		return reply{Write: &result}
	case opRenew, opRelease:
		if req.Lease == nil {
			return reply{Error: req.Op + " needs a lease"}
		}
		if req.Op == opRelease {
			return replyFor(nil, store.Authority().Release(ctx, *req.Lease, req.Tick))
		}
		lease, err := store.Authority().Renew(ctx, *req.Lease, req.Tick, req.TTL)
		return replyFor(&lease, err)
	case opRead:
		record, found, err := store.Receiver(leases.Fenced).Read(ctx, req.Resource)
		if err != nil {
			return reply{Error: err.Error()}
		}
		return reply{Read: &readReply{Found: found, Record: record}}
	}
	return reply{Error: fmt.Sprintf("unknown operation %q", req.Op)}
}

// replyFor turns an authority's answer into a reply: a refusal because the
// lease is held is an outcome, anything else that failed is an error.
func replyFor(lease *leases.Lease, err error) reply {
	switch {
	case errors.Is(err, leases.ErrLeaseHeld):
		return reply{Refused: err.Error()}
	case err != nil:
		return reply{Error: err.Error()}
	case lease == nil:
		return reply{}
	}
	return reply{Lease: lease}
}
