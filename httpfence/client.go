package httpfence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	"leases/internal/rules"
	"leases/session"
)

type keyKey struct{}

// WithKey is ctx with the operation key that Transport sends with a
// request made under it: give each distinct operation its own key, and
// its retries the same one.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyKey{}, key)
}

// Transport is base (http.DefaultTransport when nil) sending each request
// with s's lease: its resource and epoch, and an operation key. The key
// is the request context's (WithKey), or else derived from the epoch, the
// method, the URL and the body's SHA-256: the same on every retry of the
// same request in the tenure, and the same for two identical requests,
// which the receiver then takes for one operation (a second "add 1" is a
// replay of the first): give distinct operations distinct keys with
// WithKey. It sends nothing once s has ended (Check fails): its error
// then matches session.ErrEnded. Send requests under s.Context() for
// them to be cut off when the session ends.
func Transport(s *session.Session, base http.RoundTripper) http.RoundTripper {
	return &transport{base: base, token: func() (string, int64, error) {
		if err := s.Check(); err != nil {
			return "", 0, err
		}
		lease := s.Lease()
		return lease.Resource, lease.Epoch, nil
	}}
}

// FromEnvironment is Transport for a command run by `leases run`, which
// has no session of its own: the lease's resource and epoch are the
// environment's LEASES_RESOURCE and LEASES_EPOCH, and `leases run` stops
// the command when its lease may be lost. Their absence or a malformed
// epoch is an error.
func FromEnvironment(base http.RoundTripper) (http.RoundTripper, error) {
	resource, epochText := os.Getenv("LEASES_RESOURCE"), os.Getenv("LEASES_EPOCH")
	epoch, err := strconv.ParseInt(epochText, 10, 64)
	if err == nil {
		err = rules.First(rules.CheckName("LEASES_RESOURCE", resource), rules.CheckEpoch(epoch))
	}
	if err != nil {
		return nil, fmt.Errorf("httpfence: LEASES_RESOURCE=%q LEASES_EPOCH=%q are not a lease: %w", resource, epochText, err)
	}
	return &transport{base: base, token: func() (string, int64, error) { return resource, epoch, nil }}, nil
}

type transport struct {
	base  http.RoundTripper
	token func() (resource string, epoch int64, err error)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resource, epoch, err := t.token()
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("httpfence: not sent: %w", err)
	}
	out := req.Clone(req.Context())
	key, _ := req.Context().Value(keyKey{}).(string)
	if key == "" {
		if key, err = derivedKey(out, epoch); err != nil {
			return nil, fmt.Errorf("httpfence: not sent: %w", err)
		}
	}
	out.Header.Set(HeaderResource, resource)
	out.Header.Set(HeaderEpoch, strconv.FormatInt(epoch, 10))
	out.Header.Set(HeaderKey, key)
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(out)
}

// derivedKey is the key of req (whose body it reads, and replaces with
// the bytes it read) at epoch: the SHA-256 of the epoch, the method, the
// URL and the body's SHA-256, 32 hex digits of it.
func derivedKey(req *http.Request, epoch int64) (string, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		closeBody(req)
		if err != nil {
			return "", fmt.Errorf("read the body: %w", err)
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	bodySum := sha256.Sum256(body)
	sum := sha256.Sum256(fmt.Appendf(nil, "%d %s %s %x", epoch, req.Method, req.URL.String(), bodySum))
	return hex.EncodeToString(sum[:16]), nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
