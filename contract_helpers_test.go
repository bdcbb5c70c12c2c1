package leases_test

import (
	"context"
	"errors"
	"testing"

	"leases"
)

// authorityStep is one call in a scripted run of an authority: an acquire,
// a renew or a release, and what it must give. Scripts interleave two
// resources, so that every step also shows it left the other alone.
type authorityStep struct {
	name     string
	op       string // "acquire", "renew" or "release"
	resource string // acquire
	holder   string // acquire
	lease    string // renew, release: the saved lease to use
	tick     int64
	ttl      int64 // acquire, renew
	want     leases.Lease
	wantErr  error  // the sentinel the call must match; nil: it must succeed
	save     string // keep the lease the call returns under this name
}

// runAuthorityScript runs steps in order against auth. A step whose lease
// name starts with "~" uses the saved lease with holder "B" instead: a
// lease nobody was granted.
func runAuthorityScript(t *testing.T, auth leases.Authority, steps []authorityStep) {
	t.Helper()
	ctx := context.Background()
	saved := map[string]leases.Lease{}
	for i, s := range steps {
		held := saved[s.lease]
		if len(s.lease) > 0 && s.lease[0] == '~' {
			held = saved[s.lease[1:]]
			held.Holder = "B"
		}
		var got leases.Lease
		var err error
		switch s.op {
		case "acquire":
			got, err = auth.Acquire(ctx, s.resource, s.holder, s.tick, s.ttl)
		case "renew":
			got, err = auth.Renew(ctx, held, s.tick, s.ttl)
		case "release":
			err = auth.Release(ctx, held, s.tick)
		default:
			t.Fatalf("step %d: unknown operation %q", i+1, s.op)
		}
		switch {
		case s.wantErr != nil:
			if !errors.Is(err, s.wantErr) {
				t.Fatalf("step %d (%s): %+v, %v; want %v", i+1, s.name, got, err, s.wantErr)
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

// leaseOf is the lease a step expects.
func leaseOf(resource, holder string, epoch, grantedAt, expiresAt int64) leases.Lease {
	return leases.Lease{Resource: resource, Holder: holder, Epoch: epoch, GrantedAt: grantedAt, ExpiresAt: expiresAt}
}
