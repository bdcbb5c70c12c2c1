// Command run-experiment reruns the leases experiment with real worker
// processes, on SQLite and on a three-member etcd cluster whose members
// are processes of their own, and writes, or checks, its semantic result.
//
//	go run ./cmd/run-experiment --check results.json --output reproduced.json
//
// Exit status: 0 match, 1 mismatch, 2 usage error, bad file or unwritable
// output (found before anything runs), 3 the experiment failed (or was
// interrupted). go run turns every non-zero status into 1, printing "exit
// status N"; to see the status itself, build the command first:
//
//	go build -o run-experiment ./cmd/run-experiment
//
// It is a module of its own, so that a user of the SQLite backend alone
// never downloads or compiles etcd.
package main

import (
	"os"
	"runtime/debug"

	"leases/cmd/run-experiment/etcdbackend"
	"leases/evidence/backend"
	"leases/evidence/command"
	"leases/evidence/worker"
	"leases/internal/roles"
)

func main() {
	// A run is a batch of two seconds or so whose heap stays small (its
	// peak, every process's, under 80 MiB): at Go's default GOGC of 100
	// the collector took a tenth of its CPU, on two cores that the
	// backends share. Set before the roles run, so that the members and
	// workers, this same binary, collect as seldom. GOGC, when set, wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	drivers := []backend.Driver{backend.SQLite{}, etcdbackend.Backend{}}
	// First: this binary is also every worker and every etcd member of
	// its run.
	worker.Register(drivers...)
	roles.Run()
	os.Exit(command.Command(drivers...))
}
