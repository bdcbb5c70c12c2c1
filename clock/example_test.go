package clock_test

import (
	"context"
	"fmt"

	"leases/clock"
)

// A manual clock moves only when told to: a goroutine waiting for tick 3
// wakes when Advance reaches it, and not before. Waiters is the handshake
// that tells the test the goroutine waits, instead of a sleep.
func ExampleManual() {
	ctx := context.Background()
	clk := clock.NewManual(0)
	woke := make(chan error)
	go func() { woke <- clk.Wait(ctx, 3) }()
	if err := clk.Waiters(ctx, 1); err != nil {
		fmt.Println(err)
	}
	_ = clk.Advance(2)
	fmt.Println("now", clk.Now())
	_ = clk.Advance(3)
	fmt.Println("woke:", <-woke, "now", clk.Now())
	fmt.Println(clk.Advance(1))
	// Output:
	// now 2
	// woke: <nil> now 3
	// clock: cannot move from tick 3 back to 1
}
