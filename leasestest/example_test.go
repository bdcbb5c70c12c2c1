package leasestest_test

import (
	"context"
	"fmt"

	"leases/leasestest"
)

// Check runs the suite and says which clauses a backend breaks: here the
// in-memory backend of this package's tests (memory_test.go), whole and
// then with its release forgetting the resource's epoch.
func ExampleCheck() {
	ctx := context.Background()
	fmt.Println(leasestest.Check(ctx, newBackend(ctx, flaws{})))
	fmt.Println(leasestest.Check(ctx, newBackend(ctx, flaws{reuseEpochs: true}), leasestest.Epochs, leasestest.Release))
	// Output:
	// <nil>
	// release never reuses an epoch: step 9 (B at the release tick, a new epoch): got {Resource:r Holder:B Epoch:1 GrantedAt:5 ExpiresAt:7 Ticks:}, want {Resource:r Holder:B Epoch:2 GrantedAt:5 ExpiresAt:7 Ticks:}
}
