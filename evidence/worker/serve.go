package worker

import (
	"bufio"
	"bytes"
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

// run serves as a worker and returns its exit status, and whether it left
// its assignment (opLeave) rather than exited: a worker in standby then
// waits for the next one. A worker that exits early says why as its last
// line on stderr, which the controller quotes when it reports the
// worker's end.
func run(ctx context.Context, drivers []backend.Driver, name, address string, in *bufio.Reader, out, stderr io.Writer) (status int, left bool) {
	left, err := serve(ctx, drivers, name, address, in, out)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1, false
	}
	return 0, left
}

// serve opens its own store on the sandbox, announces its pid, then
// performs one request per input line. It returns when told to exit or
// to leave, or when its input ends: a controller that is gone leaves no
// worker behind. Told to leave, it ends its session and closes its store
// before it replies, so that the reply says the process holds nothing of
// the assignment any more. Its error says why the worker exits early; the
// worker prints it as its last line on stderr.
func serve(ctx context.Context, drivers []backend.Driver, name, address string, in *bufio.Reader, out io.Writer) (left bool, err error) {
	enc := json.NewEncoder(out)
	driver, err := backend.Find(drivers, name)
	var store backend.Store
	if err == nil {
		store, err = driver.Open(ctx, address)
	}
	if err != nil {
		_ = enc.Encode(failure(err))
		return false, err
	}
	w := &worker{store: store}
	end, err := w.serve(ctx, in, enc)
	w.endSession()
	if closeErr := store.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("closing the store: %w", closeErr)
	}
	if end != opLeave {
		return false, err
	}
	if err != nil {
		_ = enc.Encode(failure(err))
		return false, err
	}
	if err := enc.Encode(reply{}); err != nil {
		return false, fmt.Errorf("writing a reply: %w", err)
	}
	return true, nil
}

// worker is one worker process's state: its store, and the session it
// may hold, on a clock of its own that the controller moves.
type worker struct {
	store   backend.Store
	clock   *clock.Manual
	session *session.Session
}

// serve announces the worker and performs requests until one says exit
// (answered here) or leave (answered by the caller, once the store is
// closed), which it returns, or until the input ends ("").
func (w *worker) serve(ctx context.Context, in *bufio.Reader, enc *json.Encoder) (end string, err error) {
	if err := enc.Encode(reply{PID: os.Getpid()}); err != nil {
		return "", fmt.Errorf("announcing its pid: %w", err)
	}
	for {
		req, err := readRequest(in)
		if err == io.EOF {
			return "", nil
		}
		if err != nil {
			_ = enc.Encode(failure(err))
			return "", err
		}
		switch req.Op {
		case opLeave:
			return opLeave, nil
		case opExit:
			if err := enc.Encode(reply{}); err != nil {
				return opExit, fmt.Errorf("writing a reply: %w", err)
			}
			return opExit, nil
		}
		if err := enc.Encode(w.perform(ctx, req)); err != nil {
			return "", fmt.Errorf("writing a reply: %w", err)
		}
	}
}

// readRequest reads the next request; io.EOF: the input ended.
func readRequest(in *bufio.Reader) (request, error) {
	line, err := readLine(in)
	if err == io.EOF {
		return request{}, err
	}
	if err != nil {
		return request{}, fmt.Errorf("reading a request: %w", err)
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return request{}, fmt.Errorf("garbled request: %w", err)
	}
	return req, nil
}

// readLine reads one input line, without its newline; a last line
// without one counts too. io.EOF: the input ended, nothing left.
func readLine(in *bufio.Reader) ([]byte, error) {
	line, err := in.ReadBytes('\n')
	if err == io.EOF && len(line) > 0 {
		err = nil
	}
	return bytes.TrimSuffix(line, []byte("\n")), err
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
