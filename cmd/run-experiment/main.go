// Command run-experiment reruns the leases experiment with real worker
// processes, on SQLite and on a three-member etcd cluster it starts in its
// own process, and writes, or checks, its semantic result.
//
//	go run ./cmd/run-experiment --check results.json --output reproduced.json
//
// Exit status: 0 match, 1 mismatch, 2 usage error or bad file, 3 the
// experiment failed (or was interrupted).
//
// It is a module of its own, so that a user of the SQLite backend alone
// never downloads or compiles etcd.
package main

import (
	"os"

	"leases/internal/backend"
	"leases/internal/command"
	"leases/tests/etcdbackend"
)

func main() {
	os.Exit(command.Command(backend.SQLite{}, etcdbackend.Backend{}))
}
