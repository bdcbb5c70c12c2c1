// Command run-experiment reruns the leases experiment with real worker
// processes and writes, or checks, its semantic result.
//
//	go run ./cmd/run-experiment --check results.json --output reproduced.json
//
// Exit status: 0 match, 1 mismatch, 2 usage error or bad file, 3 the
// experiment failed (or was interrupted).
package main

import (
	"os"

	"leases/internal/backend"
	"leases/internal/command"
)

func main() {
	os.Exit(command.Command(backend.SQLite{}))
}
