package worker

import (
	"fmt"
	"io"
	"os"
)

// EchoEnv makes the binary a bare worker: it announces itself and exits
// when its input ends. Starting one is the floor that the command's
// timings measure starting a worker against.
const EchoEnv = "LEASES_WORKER_ECHO"

func runEchoIfRequested() {
	if _, ok := os.LookupEnv(EchoEnv); !ok {
		return
	}
	fmt.Printf("{\"pid\":%d}\n", os.Getpid())
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
