// Command run-experiment reruns the leases experiment with real worker
// processes and writes, or checks, its semantic result.
//
//	go run ./cmd/run-experiment --check results.json --output reproduced.json
//
// Exit status: 0 match, 1 mismatch, 2 usage error or bad file, 3 the
// experiment failed (or was interrupted).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"leases/internal/experiment"
)

func main() {
	// The command re-executes itself as its worker processes.
	experiment.RunWorkerIfRequested()
	// An interrupted run still kills its workers and removes its
	// temporary directory: the signal cancels the run instead of ending
	// the process outright.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := experiment.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
