package httpfence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"leases"
	"leases/ops"
)

// The headers of a fenced call, and of its answers.
const (
	// HeaderResource is the caller's lease's resource.
	HeaderResource = "Leases-Resource"
	// HeaderEpoch is the caller's lease's epoch, a decimal integer of at
	// least 1.
	HeaderEpoch = "Leases-Epoch"
	// HeaderKey names the operation among the tenure's (the IETF
	// httpapi Idempotency-Key draft's header; its value is any name of
	// 1 to 256 bytes, without control characters).
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is "true" on the stored answer of a replay.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderNewest is the newest admitted epoch, on a stale call's 409.
	HeaderNewest = "Leases-Newest-Epoch"
)

// MaxRequestBytes bounds the body of a fenced request, which the
// middleware reads whole to tell a retry from another request: a
// larger one is answered 413.
const MaxRequestBytes = 1 << 20

type txKey struct{}

// Tx is the record's transaction of a request that Handler serves: do
// the request's effect in it, and it commits with the record, or neither
// does. Nil outside Handler (under External, say).
func Tx(r *http.Request) *sql.Tx {
	tx, _ := r.Context().Value(txKey{}).(*sql.Tx)
	return tx
}

// Handler serves h's effects in the receiver's database under table, the
// record of operations: each request must carry HeaderResource,
// HeaderEpoch and HeaderKey. A new operation runs h with Tx(r), the
// transaction that admits its epoch and stores its record; h's answer
// is buffered, stored with the record, committed with h's rows, and only
// then written. The same request again gets the stored answer with
// "Idempotent-Replayed: true", and h does not run. Other answers, each
// with a one-line text/plain body:
//
//	400  no Idempotency-Key, or a header that is malformed
//	428  no Leases-Resource or no Leases-Epoch
//	409  stale: a newer epoch was admitted (Leases-Newest-Epoch: N)
//	409  in progress: the first call with the key has not finished (Retry-After: 1)
//	422  conflict: the key was used with another request
//	413  a body over MaxRequestBytes
//	503  not done, or its outcome unknown: send the same request again (Retry-After: 1)
//
// h does its database work in Tx(r), never on the database handle: on
// SQLite's one connection that would wait for itself.
//
// An answer of h with a status of 500 or more rolls its transaction back,
// record and rows, and is written unrecorded: a retry runs h again. Of
// h's headers only Content-Type is stored and written.
func Handler(table *ops.Table, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call, ok := readCall(w, r)
		if !ok {
			return
		}
		var failed *ops.Response
		var panicked any
		result, err := table.Do(r.Context(), call, func(ctx context.Context, tx *sql.Tx) (ops.Response, error) {
			resp, p := serve(h, r.WithContext(context.WithValue(ctx, txKey{}, tx)))
			switch {
			case p != nil:
				panicked = p
				return ops.Response{}, errPanicked
			case resp.Status >= 500:
				failed = &resp
				return ops.Response{}, errHandlerFailed
			}
			return resp, nil
		})
		switch {
		case panicked != nil:
			panic(panicked) // rolled back; the server's own recovery goes on
		case failed != nil:
			write(w, *failed, false)
		default:
			answer(w, result, err)
		}
	})
}

// External serves h's effects outside the database (an email, a call to
// a payment API) under table: a new operation's record is committed as
// pending before h runs, and completed with h's answer, whatever it is,
// after; then the answer is written. Tx(r) is nil. A retry while h runs,
// or after its answer could not be recorded, is answered 409 in
// progress: whether the effect happened is then unknown, and it is never
// done a second time. Answers as for Handler, except that h's 5xx
// answers are recorded too (the effect may have begun), and that an
// answer that could not be recorded is still written, with
// "Leases-Record: pending": the record then stays pending until an
// operator completes it.
func External(table *ops.Table, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call, ok := readCall(w, r)
		if !ok {
			return
		}
		pending, result, err := table.Begin(r.Context(), call)
		if err != nil || pending == nil {
			answer(w, result, err)
			return
		}
		resp, panicked := serve(h, r)
		if panicked != nil {
			// Left pending: the effect may have begun.
			panic(panicked)
		}
		// Recorded whether or not the caller is still there: the effect
		// was done.
		if err := pending.Complete(context.WithoutCancel(r.Context()), resp); err != nil {
			// The effect was done, and its answer is still the truth for
			// this caller; the record stays pending (retries: in
			// progress) until an operator completes it.
			w.Header().Set("Leases-Record", "pending")
		}
		write(w, resp, false)
	})
}

var (
	errHandlerFailed = errors.New("the handler answered a server error")
	errPanicked      = errors.New("the handler panicked")
)

// readCall reads the operation a request names, or answers the request
// with why it names none.
func readCall(w http.ResponseWriter, r *http.Request) (ops.Call, bool) {
	resource, epochText, key := r.Header.Get(HeaderResource), r.Header.Get(HeaderEpoch), r.Header.Get(HeaderKey)
	if resource == "" || epochText == "" {
		line(w, http.StatusPreconditionRequired, "the request needs the headers %s and %s: the caller's lease", HeaderResource, HeaderEpoch)
		return ops.Call{}, false
	}
	epoch, err := strconv.ParseInt(epochText, 10, 64)
	if err != nil || epoch < 1 {
		line(w, http.StatusBadRequest, "%s %q is not an epoch (an integer of at least 1)", HeaderEpoch, epochText)
		return ops.Call{}, false
	}
	if key == "" {
		line(w, http.StatusBadRequest, "the request needs the header %s: the operation's key", HeaderKey)
		return ops.Call{}, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			line(w, http.StatusRequestEntityTooLarge, "the body is over %d bytes", MaxRequestBytes)
		} else {
			line(w, http.StatusBadRequest, "the body could not be read: %v", err)
		}
		return ops.Call{}, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return ops.Call{Resource: resource, Epoch: epoch, Key: key, Request: request(r.Method, r.URL.RequestURI(), body)}, true
}

// request is what makes two calls with one key the same operation: the
// method, the target and the body's SHA-256.
func request(method, target string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return fmt.Appendf(nil, "%s %s %x", method, target, sum)
}

// answer writes the record's answer, or the error's.
func answer(w http.ResponseWriter, result ops.Result, err error) {
	switch {
	case errors.Is(err, leases.ErrInvalidInput):
		line(w, http.StatusBadRequest, "%v", err)
	case errors.Is(err, leases.ErrOutcomeUnknown):
		w.Header().Set("Retry-After", "1")
		line(w, http.StatusServiceUnavailable, "outcome unknown: send the same request again, the record will tell")
	case err != nil:
		w.Header().Set("Retry-After", "1")
		line(w, http.StatusServiceUnavailable, "not done: %v", err)
	case result.Outcome == leases.Accepted:
		write(w, result.Response, false)
	case result.Outcome == leases.Replay:
		write(w, result.Response, true)
	case result.Outcome == leases.Stale:
		w.Header().Set(HeaderNewest, strconv.FormatInt(result.Newest, 10))
		line(w, http.StatusConflict, "stale: epoch %d was admitted for this resource, newer than the request's", result.Newest)
	case result.Outcome == leases.InProgress:
		w.Header().Set("Retry-After", "1")
		line(w, http.StatusConflict, "in progress: the first request with this key has not finished")
	case result.Outcome == leases.Conflict:
		line(w, http.StatusUnprocessableEntity, "conflict: this key was used with another request")
	default:
		line(w, http.StatusInternalServerError, "unknown outcome %q", result.Outcome)
	}
}

// line answers status with a one-line text/plain body.
func line(w http.ResponseWriter, status int, format string, args ...any) {
	write(w, ops.Response{Status: status, Type: "text/plain; charset=utf-8", Body: fmt.Appendf(nil, format+"\n", args...)}, false)
}

func write(w http.ResponseWriter, resp ops.Response, replayed bool) {
	if resp.Type != "" {
		w.Header().Set("Content-Type", resp.Type)
	}
	if replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(resp.Body)))
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// serve runs h on r with a buffer for its answer; a panic of h is
// returned, to be raised again once the record is settled.
func serve(h http.Handler, r *http.Request) (resp ops.Response, panicked any) {
	b := &buffer{header: http.Header{}}
	func() {
		defer func() { panicked = recover() }()
		h.ServeHTTP(b, r)
	}()
	return b.response(), panicked
}

// buffer is an http.ResponseWriter that keeps the answer.
type buffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *buffer) Header() http.Header { return b.header }

func (b *buffer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *buffer) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

func (b *buffer) response() ops.Response {
	status, body := b.status, b.body.Bytes()
	if status == 0 {
		status = http.StatusOK
	}
	typ := b.header.Get("Content-Type")
	if typ == "" && len(body) > 0 {
		typ = http.DetectContentType(body)
	}
	return ops.Response{Status: status, Type: typ, Body: bytes.Clone(body)}
}
