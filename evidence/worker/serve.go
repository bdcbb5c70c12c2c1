package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"leases"
	"leases/clock"
	"leases/evidence/backend"
	"leases/session"
)

// run serves as a worker and returns its exit status. A worker that exits
// early says why as its last line on stderr, which the controller quotes
// when it reports the worker's end.
func run(ctx context.Context, drivers []backend.Driver, name, address string, in io.Reader, out, stderr io.Writer) int {
	if err := serve(ctx, drivers, name, address, in, out); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// serve opens its own store on the sandbox, announces its pid, then
// performs one request per input line. It returns when told to exit or
// when its input ends: a controller that is gone leaves no worker behind.
// Its error says why the worker exits early; the worker prints it as its
// last line on stderr.
func serve(ctx context.Context, drivers []backend.Driver, name, address string, in io.Reader, out io.Writer) (err error) {
	enc := json.NewEncoder(out)
	driver, err := backend.Find(drivers, name)
	if err == nil {
		var store backend.Store
		if store, err = driver.Open(ctx, address); err == nil {
			w := &worker{store: store}
			defer func() {
				w.endSession()
				if closeErr := store.Close(); err == nil && closeErr != nil {
					err = fmt.Errorf("closing the store: %w", closeErr)
				}
			}()
			return w.serve(ctx, in, enc)
		}
	}
	_ = enc.Encode(failure(err))
	return err
}

// worker is one worker process's state: its store, and the session it
// may hold, on a clock of its own that the controller moves.
type worker struct {
	store   backend.Store
	clock   *clock.Manual
	session *session.Session
}

func (w *worker) serve(ctx context.Context, in io.Reader, enc *json.Encoder) error {
	if err := enc.Encode(reply{PID: os.Getpid()}); err != nil {
		return fmt.Errorf("announcing its pid: %w", err)
	}
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lines.Scan() {
		var req request
		if err := json.Unmarshal(lines.Bytes(), &req); err != nil {
			err = fmt.Errorf("garbled request: %w", err)
			_ = enc.Encode(failure(err))
			return err
		}
		if req.Op == opExit {
			if err := enc.Encode(reply{}); err != nil {
				return fmt.Errorf("writing a reply: %w", err)
			}
			return nil
		}
		if err := enc.Encode(w.perform(ctx, req)); err != nil {
			return fmt.Errorf("writing a reply: %w", err)
		}
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("reading a request: %w", err)
	}
	return nil
}

func (w *worker) perform(ctx context.Context, req request) reply {
	auth := w.store.Authority()
	switch req.Op {
	case opAcquire:
		lease, err := auth.Acquire(ctx, req.Resource, req.Holder, req.Tick, req.TTL)
		return leaseReply(&lease, err)
	case opWrite:
		mode, ok := req.Receiver.Mode()
		if !ok {
			return reply{Error: req.Op + " needs the fenced or the unfenced receiver"}
		}
		return writeReply(w.store.Receiver(mode).Write(ctx, req.Resource, req.Epoch, req.Value))
	case opGuardedWrite:
		if req.Lease == nil {
			return reply{Error: req.Op + " needs a lease"}
		}
		return writeReply(w.store.Guarded().Write(ctx, *req.Lease, req.Tick, req.Value))
	case opFence:
		return writeReply(w.store.Receiver(leases.Fenced).Fence(ctx, req.Resource, req.Epoch))
	case opRenew, opRelease:
		if req.Lease == nil {
			return reply{Error: req.Op + " needs a lease"}
		}
		if req.Op == opRelease {
			return leaseReply(nil, auth.Release(ctx, *req.Lease, req.Tick))
		}
		lease, err := auth.Renew(ctx, *req.Lease, req.Tick, req.TTL)
		return leaseReply(&lease, err)
	case opRead:
		record, found, err := backend.Reader(w.store, req.Receiver)(ctx, req.Resource)
		if err != nil {
			return failure(err)
		}
		return reply{Read: &readReply{Found: found, Record: record}}
	case opSession:
		return w.startSession(ctx, req)
	case opClock:
		return w.moveClock(req.Tick)
	case opSessionWrite:
		return w.sessionWrite(ctx, req)
	case opCallTool:
		return callTool(ctx, req)
	}
	return reply{Error: fmt.Sprintf("unknown operation %q", req.Op)}
}

// startSession starts a session on the worker's own clock, set to the
// controller's tick; the session renews when the clock moves.
func (w *worker) startSession(ctx context.Context, req request) reply {
	if w.session != nil {
		return reply{Error: "a session is already open"}
	}
	w.clock = clock.NewManual(req.Tick)
	s, err := session.Start(ctx, clock.Lessor(w.store.Authority(), w.clock), req.Resource, req.Holder,
		session.Options{TTL: time.Duration(req.TTL) * time.Millisecond, Margin: time.Duration(req.Margin) * time.Millisecond})
	if err != nil {
		return leaseReply(nil, err)
	}
	w.session = s
	lease := s.Lease()
	return reply{Lease: &lease}
}

// moveClock moves the worker's clock and reports whether the session has
// ended. It waits for the session's two goroutines, its renewal and its
// deadline timer, to be waiting on the clock again (or for the session to
// have ended), so that what the move set off has happened before the
// reply: while a renewal is under way, only the timer waits.
func (w *worker) moveClock(tick int64) reply {
	if w.session == nil {
		return reply{Error: "no session"}
	}
	if err := w.clock.Advance(tick); err != nil {
		return failure(err)
	}
	waiting := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { waiting <- w.clock.Waiters(ctx, 2) }()
	select {
	case <-waiting:
	case <-w.session.Done():
	}
	if err := w.session.Check(); err != nil {
		return reply{Ended: err.Error()}
	}
	return reply{}
}

// sessionWrite checks the session and writes with its epoch only if it
// still holds the lease: the holder's side of the protection.
func (w *worker) sessionWrite(ctx context.Context, req request) reply {
	if w.session == nil {
		return reply{Error: "no session"}
	}
	if err := w.session.Check(); err != nil {
		return reply{Ended: err.Error()}
	}
	mode, ok := req.Receiver.Mode()
	if !ok {
		return reply{Error: req.Op + " needs the fenced or the unfenced receiver"}
	}
	return writeReply(w.store.Receiver(mode).Write(ctx, req.Resource, w.session.Epoch(), req.Value))
}

func (w *worker) endSession() {
	if w.session != nil {
		_ = w.session.Close(context.Background())
	}
}

// leaseReply turns an authority's answer into a reply: a refusal because
// the lease is held is an outcome, anything else that failed is an error.
// An unknown outcome keeps the lease the call would have given: it may be
// live now, and the controller must learn it.
func leaseReply(lease *leases.Lease, err error) reply {
	switch {
	case errors.Is(err, leases.ErrLeaseHeld):
		return reply{Refused: err.Error()}
	case err != nil && errors.Is(err, leases.ErrOutcomeUnknown) && lease != nil && *lease != (leases.Lease{}):
		r := failure(err)
		r.Lease = lease
		return r
	case err != nil:
		return failure(err)
	case lease == nil:
		return reply{}
	}
	return reply{Lease: lease}
}

func writeReply(result leases.WriteResult, err error) reply {
	if err != nil {
		return failure(err)
	}
	return reply{Write: &result}
}
